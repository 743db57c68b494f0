"""The CI gate's result as text and Markdown (for a terminal and `$GITHUB_STEP_SUMMARY`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.render._escape import markdown_escape, terminal_text
from bench.render._tables import CellValue, Column, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import Gate, GateRow

GATE_COLUMNS: list[Column] = [
    Column("category", "category", ""),
    Column("metric", "metric", ""),
    Column("n", "n", "int"),
    Column("reference", "reference", "speed"),
    Column("candidate", "candidate", "speed"),
    Column("change", "change", ""),
    Column("interval", "ci", ""),
    Column("status", "status", ""),
    Column("could_detect", "detectable", ""),
]
_LEGEND = (
    "reference, candidate: geometric means over the samples both share (accept rate: pooled); "
    "change: geometric mean of per-sample candidate/reference ratios with the interval its outcome reads "
    "(level after 'at'); REGRESSED: interval below 1.00x and a change over the metric's threshold (fails the job when "
    "gated); non-inferior: interval above 1/(1 + threshold) (proven not worse than the threshold); inconclusive: "
    "neither (could_detect: the regression the row detects with 80% power); "
)


def _cells(rows: Sequence[GateRow]) -> list[dict[str, CellValue]]:
    return [
        {"category": row.category + ("" if row.gated else " (reported)"), "metric": row.metric.label, "n": row.n,
         "reference": row.reference, "candidate": row.candidate, "change": row.change, "ci": row.interval,
         "status": row.status,
         "detectable": f"-{row.detectable:.0%}" if math.isfinite(row.detectable) and row.detectable > 0 else "-"}
        for row in rows
    ]


def _as_gate(result: Gate | Sequence[GateRow]) -> Gate:
    from bench.analysis import Gate

    return result if isinstance(result, Gate) else Gate(tuple(result))


def _head(gate: Gate, allow_partial: bool) -> str:
    regressed = gate.regressions
    if regressed:
        named = ", ".join(f"{row.category} {row.metric.label}" for row in regressed)
        in_categories = sum(not _is_overall(row) for row in regressed)
        counted = f" ({in_categories} in categories)" if in_categories else ""
        head = f"{len(regressed)} regression(s){counted}: {named}"
    else:
        head = "0 regression(s)"
    if gate.failures:
        head = f"{len(gate.failures)} failure(s) besides the rows ({_first_words(gate.failures)}); " + head
    if gate.missing:
        head += f"; the candidate lost {len(gate.missing)} part(s) of the reference" + (
            " (allowed: --allow-partial)" if allow_partial else " (fails; --allow-partial to gate what is left)")
    return head


def _is_overall(row: GateRow) -> bool:
    return row.category == "overall" or row.category.endswith(": overall")


def inconclusive_line(gate: Gate) -> str | None:
    """The gated category rows that neither passed nor failed, each with the regression it could have detected."""
    rows = [row for row in gate.rows if row.gated and not _is_overall(row) and row.status == "inconclusive"]
    if not rows:
        return None
    named = ", ".join(f"{row.category} {row.metric.label}"
                      + (f" (could detect -{row.detectable:.0%})" if math.isfinite(row.detectable) else "")
                      for row in rows)
    return f"inconclusive categories ({len(rows)}): {named}"


def _first_words(failures: Sequence[str]) -> str:
    """Each failure up to its first colon: `speculation lost`."""
    return ", ".join(failure.split(":", 1)[0] for failure in failures)


def _top(gate: Gate) -> list[str]:
    """What the reader needs before the table: the failures besides the rows, then the warnings that explain it."""
    return [f"FAILED: {failure}" for failure in gate.failures] + [f"warning: {line}" for line in gate.warnings]


def _lines(gate: Gate) -> list[str]:
    notes = [row for row in gate.rows if row.note]
    inconclusive = inconclusive_line(gate)
    return ([f"missing: {item}" for item in gate.missing] + list(gate.notes)
            + [f"{row.category} {row.metric.label}: {row.note}" for row in notes]
            + ([inconclusive] if inconclusive else []))


def gate_text(result: Gate | Sequence[GateRow], *, allow_partial: bool = False) -> str:
    """The gate's one-line verdict, its table, how to read it and what the candidate lost."""
    gate = _as_gate(result)
    legend = _LEGEND + gate.method
    return ("speedbench regress: " + terminal_text(_head(gate, allow_partial)) + "\n"
            + "".join(f"{terminal_text(line)}\n" for line in _top(gate)) + legend + "\n"
            + text_table(_cells(gate.rows), GATE_COLUMNS)
            + "".join(f"{terminal_text(line)}\n" for line in _lines(gate)))


def gate_markdown(result: Gate | Sequence[GateRow], *, allow_partial: bool = False) -> str:
    """The gate's result as Markdown."""
    gate = _as_gate(result)
    failed = gate.failed(allow_partial=allow_partial)
    head = "### speedbench regress: " + ("failed: " if failed else "passed: ") + markdown_escape(
        _head(gate, allow_partial))
    legend = _LEGEND + gate.method
    notes = "".join(f"- {markdown_escape(line)}\n" for line in _lines(gate))
    top = "".join(f"> **{markdown_escape(line.split(':', 1)[0])}**:{markdown_escape(line.split(':', 1)[1])}\n>\n"
                  for line in _top(gate))
    top = top.removesuffix(">\n") + "\n" if top else ""
    return (head + "\n\n" + top + legend[0].upper() + legend[1:] + ".\n\n"
            + markdown_table(_cells(gate.rows), GATE_COLUMNS) + (f"\n{notes}" if notes else ""))
