"""Per-sample frames of runs and the pairing of two runs' samples by (id, repeat)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench._constants import MIN_SAMPLES_FOR_CI
from bench._errors import BenchError
from bench.analysis._compared import paired_metrics
from bench.analysis._intervals import LogMean, bootstrap_geomean_ci, log_mean, repeat_log_mean, yuen_log_mean
from bench.analysis._stratified import stratified_log_mean
from bench.records import Run

_FRAME_COLUMNS = ("id", "repeat", "category", "ok", "latency_s", "pred_t_s", "server_decode_t_s", "draft_n",
                  "accepted", "output", "thinking")


def results_frame(run: Run) -> pd.DataFrame:
    """One row per (sample, repeat) of a run, the last attempt of each kept."""
    latest = run.latest
    columns: dict[str, list[object]] = {
        "id": [r.id for r in latest],
        "repeat": [r.repeat for r in latest],
        "category": [r.category for r in latest],
        "ok": [r.ok for r in latest],
        "latency_s": [r.latency_s for r in latest],
        "pred_t_s": [r.predicted_per_second if r.predicted_per_second is not None else r.client_decode_t_s
                     for r in latest],
        "server_decode_t_s": [r.server_decode_t_s for r in latest],
        "draft_n": [r.draft_n for r in latest],
        "accepted": [r.draft_n_accepted for r in latest],
        "output": ["\n\n".join(r.outputs) if r.outputs else None for r in latest],
        "thinking": ["\n\n".join(r.reasoning) if r.reasoning else "" for r in latest],
    }
    frame = pd.DataFrame(columns, columns=list(_FRAME_COLUMNS))
    # typed even when empty: an empty object-dtype "ok" column would index columns, not rows
    return frame.astype({"ok": bool})


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character, or None when the strings are identical."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    for index in range(limit):
        if a[index] != b[index]:
            return index
    return limit


def pair_runs(baseline: Run, speculative: Run, *, min_pairs: int = 1) -> pd.DataFrame:
    """Match successful samples of two runs by (id, repeat) and compute each compared metric's per-sample speedup."""
    base = results_frame(baseline)
    spec = results_frame(speculative)
    base = base[base["ok"]]
    spec = spec[spec["ok"]]
    merged = base.merge(spec, on=["id", "repeat"], suffixes=("_base", "_spec"))
    require_pairs(merged, baseline, speculative, min_pairs)
    merged = merged.rename(columns={"category_spec": "category"}).drop(columns=["category_base"])
    for paired_metric in paired_metrics():
        merged[paired_metric.key] = paired_metric.ratio(merged)
    identical: list[bool | None] = []
    first_diff: list[int | None] = []
    segments: list[str | None] = []
    texts = ("output_base", "output_spec", "thinking_base", "thinking_spec")
    for out_base, out_spec, thought_base, thought_spec in zip(*(merged[name] for name in texts), strict=True):
        if out_base is None or out_spec is None:
            identical.append(None)
            first_diff.append(None)
            segments.append(None)
            continue
        index, segment = first_difference_in(thought_base, thought_spec, out_base, out_spec)
        identical.append(index is None)
        first_diff.append(index)
        segments.append(segment)
    merged["identical"] = pd.array(identical, dtype="boolean")
    merged["first_diff"] = pd.array(first_diff, dtype="Int64")
    merged["diff_segment"] = segments
    return merged


def first_difference_in(thought_a: str, thought_b: str, answer_a: str, answer_b: str) -> tuple[int | None, str | None]:
    """(index, segment) of the first difference, looked for in the thinking and then in the answer; the segment is
    `thinking` or `answer` when either side thought, None when neither did (or nothing differs)."""
    if thought_a or thought_b:
        index = first_difference(thought_a, thought_b)
        if index is not None:
            return index, "thinking"
        index = first_difference(answer_a, answer_b)
        return index, "answer" if index is not None else None
    return first_difference(answer_a, answer_b), None


def require_pairs(paired: pd.DataFrame, baseline: Run, speculative: Run, min_pairs: int) -> None:
    """Raise BenchError when fewer than `min_pairs` successful samples of the two runs were paired."""
    if len(paired) >= min_pairs:
        return
    base_ok = sum(r.ok for r in baseline.latest)
    spec_ok = sum(r.ok for r in speculative.latest)
    raise BenchError(
        f"only {len(paired)} successful samples match between the runs "
        f"(baseline {base_ok}, speculative {spec_ok}); at least {min_pairs} needed: run both over the same prompts"
    )


def paired_interval(
    frame: pd.DataFrame, column: str, *, confidence: float = 0.95, min_samples: int = MIN_SAMPLES_FOR_CI
) -> tuple[float, float, float]:
    """Geometric mean of a paired column with its interval: over per-sample values, or, when the frame holds two
    or more repeats, over samples x repeats so that between-repeat variation widens the interval."""
    values = frame[frame[column] > 0]
    if values["repeat"].nunique() >= 2:
        return bootstrap_geomean_ci(values[column].astype(float).to_numpy(), confidence=confidence,
                                    min_samples=min_samples, groups=values["repeat"].to_numpy(),
                                    ids=values["id"].to_numpy())
    return bootstrap_geomean_ci(per_sample_geomean(frame, column), confidence=confidence, min_samples=min_samples)


def paired_log_mean(frame: pd.DataFrame, column: str, *, stratified: bool = False) -> LogMean | None:
    """The estimate behind `paired_interval`: per-sample t, or samples x repeats when two or more repeats are
    complete; None below two samples. `stratified` (the overall row): categories are strata
    (`stratified_log_mean`), the repeats' drift term kept as it is."""
    values = frame[frame[column] > 0]
    if values["repeat"].nunique() >= 2:
        logs = np.log(values[column].astype(float).to_numpy())
        table = pd.DataFrame({"id": values["id"].to_numpy(), "group": values["repeat"].to_numpy(), "log": logs})
        matrix = table.pivot_table(index="id", columns="group", values="log", aggfunc="mean", sort=False).dropna()
        if matrix.shape[1] >= 2 and matrix.shape[0] >= max(2, MIN_SAMPLES_FOR_CI):
            repeated = repeat_log_mean(matrix.to_numpy())
            if not stratified or repeated.withheld is not None:
                return repeated
            category = values.drop_duplicates("id").set_index("id")["category"]
            means = pd.Series(matrix.to_numpy().mean(axis=1), index=matrix.index)
            strata = stratified_log_mean([group.to_numpy() for _, group in
                                          means.groupby(category.loc[matrix.index].to_numpy(), sort=False)])
            assert strata is not None
            return LogMean(strata.mean, strata.se, strata.df, repeated.n, f"{strata.method}; {repeated.method}",
                           drift_se=repeated.drift_se, drift_df=repeated.drift_df)
    if stratified:
        return stratified_log_mean(per_sample_logs_by_category(frame, column))
    return log_mean(np.log(per_sample_geomean(frame, column)))


def per_sample_logs_by_category(frame: pd.DataFrame, column: str) -> list[np.ndarray]:
    """Per category (first-seen order): the logs of each sample's geometric mean of a column over its repeats."""
    values = frame[["id", "category", column]].copy()
    values = values[values[column] > 0]
    values["log"] = np.log(values[column].astype(float))
    per_sample = values.groupby(["category", "id"], sort=False)["log"].mean()
    return [group.to_numpy() for _, group in per_sample.groupby(level=0, sort=False)]


def per_sample_geomean(frame: pd.DataFrame, column: str) -> np.ndarray:
    """Per sample id: the geometric mean of a column's positive values over its repeats."""
    values = frame[["id", column]].copy()
    values = values[values[column] > 0]
    values["log"] = np.log(values[column].astype(float))
    return np.exp(values.groupby("id", sort=False)["log"].mean().to_numpy())


def robust_log_mean(group: pd.DataFrame, column: str) -> LogMean | None:
    """Yuen's trimmed estimate over the per-sample logs of a paired column."""
    return yuen_log_mean(np.log(per_sample_geomean(group, column)))
