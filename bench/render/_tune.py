"""A tune rendered: the decision on top, the schedule and flags, the model and its checks, the table, the plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.render._escape import terminal_lines
from bench.render._tables import CellValue, Column, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import Tune

TUNE_COLUMNS: list[Column] = [
    Column("draft_max", "draft_max", "int"),
    Column("category", "category", ""),
    Column("concurrency", "concurrency", "int"),
    Column("measured", "measured_cell", ""),
    Column("predicted", "predicted", "speedup"),
    Column("verdict", "verdict", ""),
]
CHECK_COLUMNS: list[Column] = [
    Column("draft_max", "draft_max", "int"),
    Column("concurrency", "concurrency", "int"),
    Column("predicted_before", "predicted", "speedup"),
    Column("measured", "measured", "speedup"),
    Column("error", "error", "percent"),
]


def _k(value: int | None) -> str:
    return "undecided" if value is None else ("0 (do not speculate)" if value == 0 else str(value))


def _scope(tune: Tune, key: tuple[str, int]) -> str:
    """`draft_max K: reason` of a proven pick, `draft_max K not proven: best measured; ...` of another."""
    if tune.proof(key).proven:
        return f"draft_max {_k(tune.picks[key].draft_max)}: {tune.reason(key)}"
    return f"draft_max {_k(tune.picks[key].draft_max)} not proven: {tune.reason(key)}"


def _at(tune: Tune, level: int) -> str:
    """`concurrency C` with the load its arms achieved beside it, when recorded."""
    load = tune.load.get(level)
    return f"concurrency {level}" + (f" ({load.text})" if load is not None else "")


def decision_lines(tune: Tune) -> list[str]:
    """The recommendation as a reader says it: overall, per concurrency, per category, each with its reason."""
    lowest = tune.levels[0]
    lines = [f"overall at {_at(tune, lowest)}: {_scope(tune, ('overall', lowest))}"]
    lines += [f"{_at(tune, level)}: {_scope(tune, ('overall', level))}" for level in tune.levels[1:]]
    lines += [f"category {category} (concurrency {lowest}): {_scope(tune, (category, lowest))}"
              for category in tune.categories if (category, lowest) in tune.picks]
    lines += [f"warning: {flag}" for level in tune.levels if tune.load.get(level) is not None
              for flag in tune.load[level].flags]
    return lines


def _model_line(tune: Tune, level: int) -> list[str]:
    """The overall model at one level (a bending step cost named at its level) and its step-cost residuals."""
    from bench.analysis import not_linear_at

    prediction = tune.predictions[("overall", level)]
    bent = not_linear_at(prediction.why, level)
    lines = [f"model at concurrency {level}: {bent or prediction.text}"]
    if prediction.residuals:
        cells = ", ".join(f"K={k} {residual:+.1%}" for k, residual in prediction.residuals)
        lines.append(f"step-cost residuals at concurrency {level} (monotone curve through the measured costs against "
                     f"the line): {cells}")
    return lines


def _model_lines(tune: Tune) -> list[str]:
    lines = [line for level in tune.levels if ("overall", level) in tune.predictions
             for line in _model_line(tune, level)]
    if tune.median_error is not None:
        lines.append(f"prediction error (configurations predicted before they were measured, {len(tune.checks)}): "
                     f"median {tune.median_error:.1%}")
    return lines + list(tune.notes)


def _deploy_lines(tune: Tune) -> list[str]:
    return [f"vLLM schedule (num_speculative_tokens_per_batch_size): {tune.schedule()}",
            f"llama.cpp flags (one draft length; llama.cpp has no per-load schedule): {tune.llamacpp_flags()}"]


def _cells(tune: Tune) -> list[dict[str, CellValue]]:
    cells: list[dict[str, CellValue]] = []
    for row in tune.rows:
        measured = "n/a" if row.measured is None else f"{row.measured:.2f}x"
        if row.low is not None and row.high is not None:
            measured += f" [{row.low:.2f}, {row.high:.2f}]"
        cells.append({**row.as_cells(), "measured_cell": measured})
    return cells


LEGEND = ("measured: geometric-mean decode speedup over the configuration's own interleaved baseline, interval at "
          "the level of its Holm step (the overall rows of every concurrency are one family, the category rows "
          "another, 5% each; each family holds every configuration against the baseline and the leader against each "
          "other configuration); predicted: the model fitted to every measured configuration of the scope; ties go to "
          "the smaller draft length")


def tune_text(tune: Tune) -> str:
    """The tune as text: decision, deployment, model, the table of every configuration, the prediction checks."""
    head = terminal_lines(["Tune: which draft length to ship", *decision_lines(tune), "", *_deploy_lines(tune),
                           *_model_lines(tune)])
    checks = [{"draft_max": c.draft_max, "concurrency": c.concurrency, "predicted": c.predicted,
               "measured": c.measured, "error": c.error} for c in tune.checks]
    text = head + f"\n{LEGEND}\n" + text_table(_cells(tune), TUNE_COLUMNS)
    if checks:
        text += "\nPredicted before measured\n" + text_table(checks, CHECK_COLUMNS)
    return text


def tune_markdown(tune: Tune, plots: Sequence[str] = ()) -> str:
    """tune.md: the decision on top, ready for a pull request, then the deployment, the model and the table."""
    parts = ["## Which draft length to ship\n\n", *(f"- {markdown_escape(line)}\n" for line in decision_lines(tune)),
             "\n### Deploy\n\n", *(f"- `{line.split(': ', 1)[1]}`: {markdown_escape(line.split(': ', 1)[0])}\n"
                                   for line in _deploy_lines(tune)),
             "\n### Model\n\n", *(f"- {markdown_escape(line)}\n" for line in _model_lines(tune)),
             f"\n### Every configuration\n\n{LEGEND[0].upper()}{LEGEND[1:]}.\n\n",
             markdown_table(_cells(tune), TUNE_COLUMNS)]
    if tune.checks:
        checks = [{"draft_max": c.draft_max, "concurrency": c.concurrency, "predicted": c.predicted,
                   "measured": c.measured, "error": c.error} for c in tune.checks]
        parts += ["\n### Predicted before measured\n\n", markdown_table(checks, CHECK_COLUMNS)]
    if plots:
        parts += ["\n### Plots\n\n", *(f"- `{markdown_escape(path)}`\n" for path in plots)]
    return "".join(parts)


def plot_tune(tune: Tune, out_dir: Path, *, formats: Sequence[str] = ("png",)) -> list[Path]:
    """Speedup against draft length per concurrency: measured with intervals, the predicted curve, 1.00x."""
    from bench.render._plots import _save, plt

    figure, axis = plt.subplots(figsize=(7.0, 4.4))
    for level in tune.levels:
        rows = [row for row in tune.rows if row.category == "overall" and row.concurrency == level]
        measured = [(row, row.measured) for row in rows if row.measured is not None]
        if measured:
            points = [value for _, value in measured]
            low = [value - (row.low if row.low is not None else value) for row, value in measured]
            high = [(row.high if row.high is not None else value) - value for row, value in measured]
            axis.errorbar([row.draft_max for row, _ in measured], points, yerr=[low, high], fmt="o", capsize=3,
                          label=f"measured, concurrency {level}")
        predicted = [(row.draft_max, row.predicted) for row in rows if row.predicted is not None]
        if predicted:
            axis.plot([draft_max for draft_max, _ in predicted], [value for _, value in predicted], "--",
                      label=f"predicted, concurrency {level}")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xlabel("draft_max (K)")
    axis.set_ylabel("decode speedup over the baseline")
    axis.set_title("Speedup against draft length (overall)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return _save(figure, out_dir, "tune", formats)
