"""Renderers of the paired-statistics, lossless and run-to-run tables (text and Markdown)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.analysis import (
    ACCEPT_RATE,
    ACCEPTANCE_LENGTH,
    CATEGORY,
    DRAFTED,
    REPEAT_CV_METRICS,
    SAMPLES,
    SPEEDUP_CV_METRICS,
    STEP_COST,
    STREAM_METRICS,
    paired_metrics,
)
from bench.render._tables import (
    CellValue,
    Column,
    columns_of,
    format_value,
    markdown_escape,
    markdown_table,
    text_table,
)

if TYPE_CHECKING:
    from bench.analysis import Divergence, Estimate, Family, LosslessRow, RepeatCv, SpeedupCv, StatsRow, StreamRow
    from bench.records import SequentialStop

CATEGORY_COLUMN = Column("category", "category_cell")
"""A paired table's first column: the category, `(primary)` after the overall row's name."""

IDENTICAL_COLUMN = Column("identical", "identical_cell")
"""Identical outputs over the outputs compared (`9/10`)."""


def stats_columns() -> list[Column]:
    """The paired table's columns: per compared metric its interval, verdict and mde, then acceptance, drafted
    share, step cost and identical outputs."""
    compared = [column for paired in paired_metrics() for column in (
        Column(paired.key, f"{paired.key}_ci"), Column(f"{paired.name}_verdict", f"{paired.name}_verdict"),
        Column(f"{paired.name}_mde", f"{paired.key}_mde_cell"))]
    return [CATEGORY_COLUMN, Column.of(SAMPLES), *compared, Column.of(ACCEPT_RATE), Column.of(ACCEPTANCE_LENGTH),
            Column.of(DRAFTED), Column.of(STEP_COST), IDENTICAL_COLUMN]


def stats_markdown_columns() -> list[Column]:
    """The paired table as a pull request shows it: at most 8 columns (GitHub's 1012 px), each speedup cell holding
    its interval and, below it, its verdict; the other columns of `stats_columns()` go to `stats_more_columns()`."""
    compared = [Column(paired.key, f"{paired.key}_md") for paired in paired_metrics()]
    return [CATEGORY_COLUMN, Column.of(SAMPLES), *compared, Column.of(ACCEPT_RATE), Column.of(DRAFTED),
            IDENTICAL_COLUMN]


def stats_more_columns() -> list[Column]:
    """The paired table's other columns (mde, acceptance length, ...), by category, in a second table."""
    shown = {column.header for column in stats_markdown_columns()}
    verdicts = {f"{paired.name}_verdict" for paired in paired_metrics()}
    return [CATEGORY_COLUMN, *(column for column in stats_columns()
                               if column.header not in shown and column.header not in verdicts)]


LOSSLESS_COLUMNS: list[Column] = [
    Column.of(CATEGORY),
    IDENTICAL_COLUMN,
    Column("near_tie", "near_tie", "int"),
    Column("real", "real", "int"),
    Column("first_difference (sample@char: kind, baseline top-2 margin)", "first_diff"),
]

SPEEDUP_CV_COLUMNS: list[Column] = columns_of(SPEEDUP_CV_METRICS)

CV_COLUMNS: list[Column] = columns_of(REPEAT_CV_METRICS)


def ci_cell(point: CellValue, low: CellValue, high: CellValue, confidence: float | None = None) -> str:
    """`1.23x [1.10, 1.37]`, `n/a` parts where a bound is missing; `at 99.5%` after an interval wider than 95%."""
    if point is None or point != point:
        return "n/a"
    if low is None or high is None or low != low or high != high:
        return format_value(point, "speedup")
    bounds = f"[{format_value(low, 'speed')}, {format_value(high, 'speed')}]"
    level = f" at {confidence:.2%}".replace("0%", "%") if confidence is not None and confidence > 0.95 + 1e-9 else ""
    return f"{format_value(point, 'speedup')} {bounds}{level}"


def mde_cell(estimate: Estimate) -> str:
    """`±12%`: the smallest change the row detects with 80% power; with too few samples, the samples the target
    effect needs (`n≈40 for 10%`)."""
    parts = []
    if estimate.mde == estimate.mde:
        parts.append(f"±{estimate.mde:.0%}")
    if estimate.needed is not None:
        parts.append(f"n≈{estimate.needed} for target")  # the target effect is named in the legend
    return "; ".join(parts) or "n/a"


def _stats_cells(rows: Sequence[StatsRow], sequential: SequentialStop | None = None) -> list[dict[str, CellValue]]:
    cells = []
    for row in rows:
        cell: dict[str, CellValue] = dict(row.as_cells())
        cell["category_cell"] = f"{row.category} (primary)" if row.primary else row.category
        looked = row.primary and sequential is not None and not row.nothing_drafted  # decode read at the stop
        for paired, estimate in row.compared():
            verdict = f"{estimate.word} (sequential test)" if looked and estimate is row.decode else estimate.word
            interval = ci_cell(estimate.point, estimate.low, estimate.high, estimate.confidence)
            cell[f"{paired.name}_verdict"] = verdict
            cell[f"{paired.key}_ci"] = interval
            cell[f"{paired.key}_mde_cell"] = mde_cell(estimate)
            cell[f"{paired.key}_md"] = (interval, verdict)  # two lines in a Markdown cell
        cell["identical_cell"] = f"{row.identical}/{row.compared_outputs}" if row.compared_outputs else "n/a"
        cells.append(cell)
    return cells


def _tests(size: int) -> str:
    return f"{size} tests" if size else "no category row has an interval yet"


def _target_effect(family: Family | None) -> float:
    from bench.analysis import DEFAULT_TARGET_EFFECT  # analysis loads pandas: not at import (`run` starts fast)

    return family.target_effect if family is not None else DEFAULT_TARGET_EFFECT


def _percent(share: float) -> str:
    return f"{share:.1%}".replace(".0%", "%")


def overall_estimator_text(method: str | None) -> str:
    """How the overall row was estimated, in a reader's words: stratified by category, with its weights and rule."""
    if method is None:
        return "its interval: t over the per-sample logs"
    if method.startswith("stratified"):
        return (f"its interval {method}: the weighted mean of the category means with variance sum w_c^2 s_c^2 / n_c "
                "(the spread between categories is fixed by the design, not noise)")
    return f"its interval: {method}"


def _stats_legend(threshold: float, rows: Sequence[StatsRow], family: Family | None = None,
                  sequential: SequentialStop | None = None) -> str:
    from bench.analysis import FAMILY_ALPHA, HOLM_METHOD, family_size

    size = family.size if family is not None else family_size(tuple(rows))
    alpha = family.alpha if family is not None else FAMILY_ALPHA
    overall = (f"the overall row is the primary result, at the sequential test's stopping look ({_percent(1 - alpha)}, "
               "see the note below)" if sequential is not None else "the overall row is the primary result, at a "
               "plain 95%")
    overall += f", {overall_estimator_text(family.overall_estimator if family is not None else None)}"
    return (
        "geometric mean of per-sample speedups (the SpeedBench table: ratio of arithmetic means), samples matched by "
        "id, with a t-interval on the logs; a verdict needs the interval to exclude 1.00x and a change over "
        f"{threshold:.0%}; "
        f"category rows are one family: {HOLM_METHOD} ({_tests(size)}, family-wise false-alarm rate "
        f"{_percent(alpha)}), each interval drawn at the level its Holm step uses (after 'at'), the one its verdict "
        f"reads; {overall}; mde: the smallest true change detected with "
        f"80% power at the row's level (n≈N for target: samples a {_target_effect(family):.0%} change needs); "
        "drafted: share of the speculative output that came from accepted drafts (a row with nothing drafted gets "
        "no verdict: its speedups are noise)"
    )


def _disagreement_lines(rows: Sequence[StatsRow]) -> list[str]:
    return [
        f"{row.category}: the reference's ratio of means and the paired geometric mean disagree in direction "
        f"({'; '.join(row.disagreements)})"
        for row in rows if row.disagreements
    ]


def _outlier_lines(rows: Sequence[StatsRow]) -> list[str]:
    from bench.analysis import OUTLIER_DISTANCE, SPEED_VERDICT_WORDS

    lines = []
    for row in rows:
        if row.primary or not row.outliers:
            continue
        by_arm: dict[str, dict[str, list[str]]] = {}
        for outlier in row.outliers:
            by_arm.setdefault(outlier.arm, {}).setdefault(outlier.id, []).append(
                f"{outlier.metric} {outlier.ratio:.2f}x")
        named = "; ".join(f"{arm}: " + ", ".join(f"{sample} ({', '.join(found)})" for sample, found in samples.items())
                          for arm, samples in by_arm.items())
        lines.append(f"{row.category}: outlying samples (paired log ratio over {OUTLIER_DISTANCE:g} robust sd from "
                     f"the category median), by the arm that strayed: {named}")
    for row in rows:
        for _, estimate in row.compared():
            if estimate.note:
                lines.append(f"{row.category} {estimate.metric.label}: {estimate.note}")
            if estimate.robust_disagrees and estimate.robust is not None:
                lines.append(f"{row.category} {estimate.metric.label}: the robust interval (Yuen, 20% trimmed) reads "
                             f"{ci_cell(*estimate.robust, estimate.confidence)} "
                             f"{SPEED_VERDICT_WORDS.get(estimate.robust_verdict or '', estimate.robust_verdict)}, "
                             f"not {estimate.word}: the verdict rests on a few samples")
    return lines


def sequential_lines(sequential: SequentialStop | None, notes: Sequence[str] = ()) -> list[str]:
    """How the table reads after sampling until decided: the stopping look, the level every row is drawn at, why."""
    look = sequential.last if sequential is not None else None
    if sequential is None or look is None:
        return []
    limit = f" of at most {sequential.rounds}" if sequential.rounds else ""
    samples = f" of at most {sequential.max_samples}" if sequential.max_samples else ""
    stopped = {"undecided": "undecided at the limit", "continue": "not decided"}.get(look.decision, look.decision)
    head = (f"sequential: sampled until decided ({sequential.method}); the run stopped at look {len(sequential.looks)}"
            f"{limit}, after {look.n}{samples} samples: overall decode {stopped}. ")
    if not look.has_interval:
        return [head + "That look had no interval, so no row gets one or a verdict.", *notes]
    return [head + (
        f"Every interval and verdict in this table is drawn at the level that look spent: the overall rows at "
        f"{_percent(look.confidence)}, the category rows under Holm within {_percent(look.level)}. Over all the "
        f"looks the test could have stopped at, these levels add up to {_percent(sequential.alpha)} (union bound), "
        "so each row keeps its false-verdict rate under optional stopping, latency and categories included, although "
        "their sample size was chosen by the decode look; a fixed 95% interval would not, and none is shown."),
        *notes]


def stats_text(rows: Sequence[StatsRow], threshold: float, family: Family | None = None, *,
               sequential: SequentialStop | None = None, sequential_notes: Sequence[str] = ()) -> str:
    """The paired statistics table, both verdicts labelled, with a line that says how to read it."""
    lines = _disagreement_lines(rows) + _outlier_lines(rows) + sequential_lines(sequential, sequential_notes)
    notes = "".join(f"note: {line}\n" for line in lines)
    return (f"Paired statistics: {_stats_legend(threshold, rows, family, sequential)}\n"
            + text_table(_stats_cells(rows, sequential), stats_columns()) + notes)


def stats_markdown(rows: Sequence[StatsRow], threshold: float, family: Family | None = None, *,
                   sequential: SequentialStop | None = None, sequential_notes: Sequence[str] = ()) -> str:
    """The paired statistics as Markdown that fits GitHub's width: a one-line legend, the table in at most 8 columns
    (each speedup with its interval and verdict), then in details blocks its other columns and the full legend;
    outliers and any direction disagreements as notes."""
    lines = _disagreement_lines(rows) + _outlier_lines(rows) + sequential_lines(sequential, sequential_notes)
    notes = "".join(f"\n- {markdown_escape(line)}" for line in lines)
    legend = _stats_legend(threshold, rows, family, sequential)
    cells = _stats_cells(rows, sequential)
    short = (f"Speculative over baseline, samples matched by id: geometric mean of per-sample speedups with its "
             f"t-interval and verdict (the interval excludes 1.00x and the change is over {threshold:.0%}).\n\n")
    more = stats_more_columns()
    return (short + markdown_table(cells, stats_markdown_columns(), wrap_headers=True)
            + details("More columns: " + ", ".join(column.header for column in more[1:]), markdown_table(cells, more))
            + details("How to read this table", f"{legend[0].upper()}{legend[1:]}.\n")
            + (f"\nNotes:\n{notes}\n" if notes else ""))


def details(summary: str, body: str) -> str:
    """A collapsed GitHub details block: `summary` (plain text, escaped) shown, the Markdown `body` inside."""
    return f"\n<details><summary>{markdown_escape(summary)}</summary>\n\n{body.rstrip()}\n\n</details>\n"


def _divergence_cell(item: Divergence) -> str:
    """`math-005@93: near-tie 0.04`, `qa-004@40: real 2.31`, or `x@7: unclassified` (no log-probabilities); in a
    reasoning run `qa-004 thinking@char 812: near-tie 0.04`."""
    kind = item.kind.replace("_", "-")
    return f"{item.id}{item.where}: {kind}" + (f" {item.margin:.2f}" if item.margin is not None else "")


def _lossless_cells(rows: Sequence[LosslessRow]) -> list[dict[str, CellValue]]:
    cells: list[dict[str, CellValue]] = []
    for row in rows:
        shown = ", ".join(_divergence_cell(item) for item in row.divergences) if row.divergences else row.first_diff
        cells.append({**row.as_cells(), "identical_cell": f"{row.identical}/{row.compared}",
                      "first_diff": shown or "-"})
    return cells


def _lossless_legend(rows: Sequence[LosslessRow]) -> str:
    from bench.analysis import NEAR_TIE_STEPS

    threshold = next((row.near_tie_threshold for row in rows if row.near_tie_threshold), None)
    if threshold is None:
        return ""
    step = next((row.resolution for row in rows if row.resolution), None)
    note = next((row.resolution_note for row in rows if row.resolution_note), None)
    rule = (f"at most {NEAR_TIE_STEPS} step(s) of {step:g} nats apart (the engine's log-probability grid)" if step
            else f"under {threshold:g} nats of log-probability apart")
    return (
        f"near-tie: at the first difference the baseline's top two tokens were {rule} (batched verification flips "
        "such ties); real: further apart; unclassified: no log-probabilities recorded (run with --logprobs)"
        + (f"; {note}" if note else "")
        + (f"; {replaced} sample(s) held invalid Unicode from the server (lone surrogates, compared as U+FFFD)"
           if (replaced := max((row.replaced_text for row in rows), default=0)) else "")
    )


def lossless_text(rows: Sequence[LosslessRow]) -> str:
    """Lossless check: byte-identical outputs per category, and each first divergence classified by its margin."""
    legend = _lossless_legend(rows)
    return "Lossless check (speculative output byte-identical to baseline)\n" + text_table(
        _lossless_cells(rows), LOSSLESS_COLUMNS
    ) + (f"({legend})\n" if legend else "")


def lossless_markdown(rows: Sequence[LosslessRow]) -> str:
    """The lossless check as Markdown, with the near-tie rule."""
    legend = _lossless_legend(rows)
    return markdown_table(_lossless_cells(rows), LOSSLESS_COLUMNS) + (f"\n{legend.capitalize()}.\n" if legend else "")


def speedup_cv_text(rows: Sequence[SpeedupCv]) -> str:
    """Between-repeat against within-run variation of the paired speedups."""
    return ("Speedup variation: between repeats (CV of each repeat's geometric mean) vs within a run "
            "(spread of per-sample speedups)\n" + text_table([row.as_cells() for row in rows], SPEEDUP_CV_COLUMNS))


def speedup_cv_markdown(rows: Sequence[SpeedupCv]) -> str:
    """Between-repeat against within-run variation of the paired speedups, as Markdown."""
    return markdown_table([row.as_cells() for row in rows], SPEEDUP_CV_COLUMNS)


STREAM_DEFINITIONS: dict[str, str] = {
    "ttft": "time to first token: request sent -> first content chunk's last byte read off the socket",
    "itl": "inter-token latency per chunk: gap between consecutive content chunks (a burst of tokens is one gap)",
    "itl_tok": "per-token ITL: each chunk's gap spread evenly over the tokens it carried (first chunk's are TTFT)",
    "tpot": "time per output token: (end to end - TTFT) / (output tokens - 1), per sample",
    "queue": "queue wait: request sent - sample scheduled (a concurrency slot freed); not in TTFT or e2e",
    "e2e": "end to end: request sent -> stream finished ([DONE]), summed over turns",
}
"""One line per streaming metric, shown under the table (README: Streaming timing definitions)."""


STREAM_COLUMNS: list[Column] = columns_of(STREAM_METRICS)


def stream_definitions() -> list[str]:
    """`name: definition` lines of the streaming metrics (one per column family)."""
    return [f"{name}: {text}" for name, text in STREAM_DEFINITIONS.items()]


def stream_text(rows: Sequence[StreamRow]) -> str:
    """Streaming latency percentiles per category, followed by each metric's definition."""
    return (
        "Streaming latencies (TTFT, inter-token per chunk and per token, time per output token, queue wait, "
        "end to end)\n" + text_table([row.as_cells() for row in rows], STREAM_COLUMNS)
        + "".join(f"  {line}\n" for line in stream_definitions())
    )


def stream_markdown(rows: Sequence[StreamRow]) -> str:
    """Streaming latency percentiles as Markdown, followed by each metric's definition."""
    return (markdown_table([row.as_cells() for row in rows], STREAM_COLUMNS) + "\n"
            + "".join(f"- {line}\n" for line in stream_definitions()))


def cv_text(rows: Sequence[RepeatCv]) -> str:
    """Run-to-run coefficient of variation across repeats."""
    return "Run-to-run variation across repeats\n" + text_table([row.as_cells() for row in rows], CV_COLUMNS)


def cv_markdown(rows: Sequence[RepeatCv]) -> str:
    """Run-to-run coefficient of variation across repeats, as Markdown."""
    return markdown_table([row.as_cells() for row in rows], CV_COLUMNS)
