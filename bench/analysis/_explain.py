"""The speedup explained by its parts: acceptance length, per-position acceptance and step cost, reconciled.

A speculative decode step verifies a draft and emits 1 + (accepted) tokens; the acceptance length (AL) is the
mean tokens per step, `1 + accepted / drafts` from the counters. The step cost is the speculative time per
verification step over the baseline time per token. Their quotient AL / step cost is the decode speedup the
parts explain; it reconciles with the measured (pooled) decode speedup when the counters count every step of
exactly the row's requests. Rows where it does not are flagged with the likely cause.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bench._constants import OVERALL
from bench.analysis._grouping import each_category_of
from bench.records import Run, SampleResult, sample_positions

RECONCILE_TOLERANCE = 0.05
"""AL / step cost and the measured pooled decode speedup agree when within 5% of each other."""
FIXED_LENGTH_SHARE = 0.95
"""Drafts count as fixed-length when their mean length is at least 95% of the configured draft length."""
HISTOGRAM_BIN = 0.5
"""Width of the per-request acceptance-length histogram's bins (tokens per step), from 1.0."""


@dataclass(frozen=True, slots=True)
class RequestAcceptance:
    """The distribution of per-request acceptance lengths (tokens per verification step of each request)."""

    n: int
    mean: float
    p10: float
    median: float
    p90: float
    histogram: tuple[tuple[float, int], ...]
    """(bin's lower edge, requests in it), bins of `HISTOGRAM_BIN` from 1.0."""

    @classmethod
    def of(cls, lengths: Sequence[float]) -> RequestAcceptance | None:
        """The distribution of the given per-request lengths; None when there are none."""
        values = np.asarray([value for value in lengths if math.isfinite(value)], dtype=float)
        if values.size == 0:
            return None
        edges = np.floor((values - 1.0) / HISTOGRAM_BIN).astype(int)
        counts: dict[int, int] = {}
        for edge in edges:
            counts[int(edge)] = counts.get(int(edge), 0) + 1
        histogram = tuple((1.0 + edge * HISTOGRAM_BIN, count) for edge, count in sorted(counts.items()))
        p10, median, p90 = (float(value) for value in np.quantile(values, [0.1, 0.5, 0.9]))
        return cls(int(values.size), float(values.mean()), p10, median, p90, histogram)

    def as_cells(self) -> dict[str, object]:
        """JSON-ready: n, mean, p10, median, p90 and the histogram as [[edge, count], ...]."""
        return {"n": self.n, "mean": self.mean, "p10": self.p10, "median": self.median, "p90": self.p90,
                "histogram": [list(pair) for pair in self.histogram]}


@dataclass(frozen=True, slots=True)
class SpeedupParts:
    """One row's decode speedup explained: acceptance length, per-position acceptance, step cost, reconciled.

    `joint[i]` is P(at least i + 1 draft tokens accepted) per drafted step; `conditional[i]` is P(i + 1 accepted |
    i accepted) (the joint's running ratio). `explained` is acceptance_length / step_cost; `measured` the pooled
    decode speedup (speculative tokens per generation ms over the baseline's) it is checked against; `flag` says
    why they disagree by more than `RECONCILE_TOLERANCE`, None when they agree or there is nothing to check.
    """

    category: str
    source: str
    drafts: float
    accepted: float
    draft_tokens: float | None
    acceptance_length: float | None
    per_request: RequestAcceptance | None
    joint: tuple[float, ...]
    conditional: tuple[float, ...]
    step_cost: float | None
    explained: float | None
    measured: float | None
    flag: str | None
    mean_draft_length: float | None
    requests: Mapping[str, tuple[float, tuple[float, ...]]] = field(default_factory=dict)
    """Per sample id: (drafts, per-position accepted counts) from its own counter deltas, where it has them."""

    @property
    def reconciles(self) -> bool | None:
        """Whether AL / step cost agrees with the measured pooled decode speedup (None: nothing to check)."""
        if self.explained is None or self.measured is None:
            return None
        return self.flag is None

    def as_cells(self) -> dict[str, object]:
        """A flat JSON-ready mapping: acceptance_length, step_cost, explained/measured speedups, positions, flag."""
        return {
            "acceptance_length": self.acceptance_length,
            "acceptance_source": self.source,
            "drafts": self.drafts,
            "accepted": self.accepted,
            "mean_draft_length": self.mean_draft_length,
            "acceptance_length_per_request": self.per_request.as_cells() if self.per_request else None,
            "acceptance_joint": list(self.joint),
            "acceptance_conditional": list(self.conditional),
            "step_cost": self.step_cost,
            "explained_speedup": self.explained,
            "pooled_decode_speedup": self.measured,
            "reconciles": self.reconciles,
            "reconcile_flag": self.flag,
        }


def joint_and_conditional(positions: Sequence[float], drafts: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-position rates from counts: joint P(>= i accepted) = pos_i / drafts, conditional = joint_i / joint_i-1."""
    if drafts <= 0 or not positions:
        return (), ()
    joint = tuple(min(1.0, max(0.0, count / drafts)) for count in positions)
    conditional, previous = [], 1.0
    for rate in joint:
        conditional.append(rate / previous if previous > 0 else math.nan)
        previous = rate
    return joint, tuple(conditional)


def _per_sample_counts(result: SampleResult) -> tuple[float, float, float | None] | None:
    """(drafts, accepted, draft tokens) of one sample: counter deltas, or the engine's own step count."""
    spec = result.spec
    if spec.get("drafts"):
        tokens = spec.get("draft_tokens")
        return float(spec["drafts"]), float(spec.get("accepted") or 0.0), float(tokens) if tokens else None
    if spec.get("steps"):
        return float(spec["steps"]), float(result.draft_n_accepted), float(result.draft_n) or None
    return None


def _time_per_token(results: Iterable[SampleResult]) -> tuple[float, float]:
    """(summed generation ms, summed output tokens) of the samples that report generation time."""
    ms = tokens = 0.0
    for result in results:
        if result.predicted_ms and result.predicted_ms > 0 and result.completion_tokens > 0:
            ms += result.predicted_ms
            tokens += result.completion_tokens
    return ms, tokens


Counted = tuple[SampleResult, tuple[float, float, float | None], tuple[float, ...]]
"""One speculative sample with its (drafts, accepted, draft tokens) and per-position counts."""


def counted_sample(result: SampleResult) -> Counted | None:
    """A sample's counts, read once (None when it has none)."""
    counts = _per_sample_counts(result)
    return None if counts is None else (result, counts, sample_positions(result.spec))


def explain_row(
    category: str, baseline: Sequence[SampleResult], speculative: Sequence[SampleResult], run: Run | None = None,
    *, draft_max: int | None = None, counted: Sequence[Counted] | None = None,
) -> SpeedupParts | None:
    """One row's parts from its paired samples; the overall row falls back on the run's counters (`run`).
    `counted` is `counted_sample` of each speculative sample that has counts, when the caller has them."""
    if counted is None:
        counted = [item for item in map(counted_sample, speculative) if item is not None]
    source, server_wide, partial = "per-sample counters", False, None
    positions: tuple[float, ...] = ()
    lengths: list[float] = []
    requests: dict[str, tuple[float, tuple[float, ...]]] = {}
    if counted:
        drafts = sum(counts[0] for _, counts, _ in counted)
        accepted = sum(counts[1] for _, counts, _ in counted)
        known = [counts[2] for _, counts, _ in counted if counts[2] is not None]
        draft_tokens = sum(known) if len(known) == len(counted) else None
        if all(own for _, _, own in counted):
            width = max(len(own) for _, _, own in counted)
            totals = [0.0] * width
            for _, _, own in counted:
                for index, value in enumerate(own):
                    totals[index] += value
            positions = tuple(totals)
        lengths = [1.0 + counts[1] / counts[0] for _, counts, _ in counted if counts[0] > 0]
        requests = {result.id: (counts[0], own) for result, counts, own in counted if own and counts[0] > 0}
        if any("steps" in result.spec and "drafts" not in result.spec for result, _, _ in counted):
            source = "engine steps"
        spec_results = [result for result, _, _ in counted]
    elif category == OVERALL and run is not None and run.info.acceptance is not None \
            and run.info.acceptance.drafts and run.info.acceptance.accepted is not None:
        whole = run.info.acceptance
        source, server_wide, partial = "run counters", whole.server_wide, whole.partial
        drafts, accepted, draft_tokens = float(whole.drafts or 0.0), float(whole.accepted), whole.draft_tokens
        positions = tuple(rate * drafts for rate in whole.per_position)
        spec_results = list(speculative)
    else:
        return None
    if drafts <= 0:
        return None
    joint, conditional = joint_and_conditional(positions, drafts)
    length = 1.0 + accepted / drafts
    base_ms, base_tokens = _time_per_token(baseline)
    spec_ms, spec_tokens = _time_per_token(spec_results)
    step_cost = explained = measured = None
    if base_ms > 0 and base_tokens > 0 and spec_ms > 0:
        step_cost = (spec_ms / drafts) / (base_ms / base_tokens)
        explained = length / step_cost
        measured = (spec_tokens / spec_ms) / (base_tokens / base_ms) if spec_tokens > 0 else None
    mean_length = (draft_tokens / drafts) if draft_tokens else None
    flag = _flag(explained, measured, drafts=drafts, accepted=accepted, tokens=spec_tokens,
                 server_wide=server_wide, partial=partial, mean_length=mean_length, draft_max=draft_max)
    return SpeedupParts(
        category=category, source=source, drafts=drafts, accepted=accepted, draft_tokens=draft_tokens,
        acceptance_length=length, per_request=RequestAcceptance.of(lengths), joint=joint, conditional=conditional,
        step_cost=step_cost, explained=explained, measured=measured, flag=flag, mean_draft_length=mean_length,
        requests=requests,
    )


def _flag(
    explained: float | None, measured: float | None, *, drafts: float, accepted: float, tokens: float,
    server_wide: bool, partial: str | None, mean_length: float | None, draft_max: int | None,
) -> str | None:
    """Why AL / step cost misses the measured speedup by more than the tolerance, or None when it does not."""
    if explained is None or measured is None or measured <= 0:
        return None
    if abs(explained / measured - 1.0) <= RECONCILE_TOLERANCE:
        return None
    gap = f"AL / step cost {explained:.2f}x vs measured {measured:.2f}x"
    if partial:
        return f"{gap}: the counters do not cover the run ({partial})"
    if server_wide:
        return f"{gap}: the counters are server-wide and cover other requests than this row's"
    counted = drafts + accepted
    if tokens > 0 and counted < (1.0 - RECONCILE_TOLERANCE) * tokens:
        variable = (f"; drafts average {mean_length:.1f} tokens of {draft_max}"
                    if mean_length is not None and draft_max and mean_length < FIXED_LENGTH_SHARE * draft_max
                    else "")
        return (f"{gap}: {tokens - accepted:.0f} decode steps made {tokens:.0f} tokens but the counters count "
                f"{drafts:.0f} drafts: steps without a draft (variable-length or skipped drafts){variable}")
    return f"{gap}: the server counts differently (drafts + accepted = {counted:.0f} for {tokens:.0f} tokens)"


def configured_draft_max(run: Run) -> int | None:
    """The draft length the speculative server was started with, as its run file's tags record it."""
    tags = run.config.get("tags") if isinstance(run.config, Mapping) else None
    value = tags.get("draft_max") if isinstance(tags, Mapping) else None
    return int(value) if isinstance(value, int | str) and str(value).isdigit() else None


def explain_runs(baseline: Run, speculative: Run, *, draft_max: int | None = None) -> dict[str, SpeedupParts]:
    """Per category and overall: the parts of the decode speedup over the two runs' paired successful samples
    (`draft_max` defaults to the speculative run's recorded one)."""
    draft_max = draft_max if draft_max is not None else configured_draft_max(speculative)
    base = {result.key: result for result in baseline.latest if result.ok}
    spec = [result for result in speculative.latest if result.ok and result.key in base]
    facts = {result.key: counted_sample(result) for result in spec}
    parts: dict[str, SpeedupParts] = {}
    for category, group in each_category_of(spec, lambda result: result.category):
        counted = [item for result in group if (item := facts[result.key]) is not None]
        row = explain_row(category, [base[result.key] for result in group], group,
                          speculative if category == OVERALL else None, draft_max=draft_max, counted=counted)
        if row is not None:
            parts[category] = row
    return parts
