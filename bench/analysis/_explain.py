"""The speedup explained by its parts: tokens per decode step and the cost of a step, reconciled.

Every decode step emits one token plus the draft tokens it accepted, so a row's decode steps are its output
tokens less the accepted ones, and some of them drafted (the counters' drafts; ngram drafters draft on a minority
of steps, a draft model on nearly all). The decode speedup is

    tokens per step / step cost,   tokens per step = 1 + drafted share x accepted per draft

with the step cost in baseline tokens (speculative time per decode step over the baseline's time per token).
Where the requests' drafted shares differ enough, a least-squares line through the requests' step costs against
their drafted share splits the step cost into steps with and without a draft. The parts multiply back to the
measured (pooled) decode speedup when the counters count exactly the row's requests; rows whose counters do not
(server-wide counters, a restarted server, more drafts than decode steps) are flagged with the likely cause.
The acceptance length (AL, `1 + accepted / drafts`) is the tokens per drafted step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bench._constants import OVERALL
from bench._types import JsonObject
from bench.analysis._grouping import each_category_of
from bench.records import Run, SampleResult, sample_positions

RECONCILE_TOLERANCE = 0.05
"""Tokens per step / step cost and the measured pooled decode speedup agree when within 5% of each other."""
SPLIT_MIN_REQUESTS = 3
"""Requests a row needs before its step cost is split into steps with and without a draft."""
SPLIT_MIN_SPREAD = 0.05
"""Least (step-weighted) standard deviation of the requests' drafted shares for the split to be identified."""
SPLIT_MAX_ERROR = 0.25
"""Largest standard error, relative to the fitted cost, of either part of an identified split."""
ALL_DRAFTED = 0.99
"""A drafted share at least this high: every step drafted, the step cost is the drafted steps' cost."""
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

    def as_cells(self) -> JsonObject:
        """JSON-ready: n, mean, p10, median, p90 and the histogram as [[edge, count], ...]."""
        return {"n": self.n, "mean": self.mean, "p10": self.p10, "median": self.median, "p90": self.p90,
                "histogram": [list(pair) for pair in self.histogram]}


@dataclass(frozen=True, slots=True)
class StepSplit:
    """A row's step cost (x baseline token) split into steps with a draft and steps without one.

    `drafted` and `plain` are None where the data does not identify them; `how` says how they were found or why not.
    Where both are found, (1 - share) x plain + share x drafted is the row's pooled step cost.
    """

    drafted: float | None
    plain: float | None
    how: str


def split_step_cost(units: Sequence[tuple[float, float, float]], step_cost: float, share: float) -> StepSplit:
    """The split of a step cost from per-request (decode steps, drafts, step cost x baseline token): a line through
    the step costs against the drafted share, weighted by steps, where the shares spread enough to identify it."""
    if share >= ALL_DRAFTED:
        return StepSplit(step_cost, None, f"every step drafted ({share:.0%}): the step cost is a drafted step's")
    if len(units) < SPLIT_MIN_REQUESTS:
        return StepSplit(None, None, f"not identified: {len(units)} request(s), the split needs "
                                     f"{SPLIT_MIN_REQUESTS} with different drafted shares")
    weights = np.asarray([steps for steps, _, _ in units], dtype=float)
    shares = np.asarray([min(1.0, drafts / steps) for steps, drafts, _ in units], dtype=float)
    costs = np.asarray([cost for _, _, cost in units], dtype=float)
    mean = float(np.average(shares, weights=weights))
    spread = math.sqrt(float(np.average((shares - mean) ** 2, weights=weights)))
    if spread < SPLIT_MIN_SPREAD:
        return StepSplit(None, None, f"not identified: the requests' drafted shares barely differ (sd {spread:.2f})")
    design = np.column_stack([1.0 - shares, shares]) * np.sqrt(weights)[:, None]
    target = costs * np.sqrt(weights)
    (plain, drafted), *_ = np.linalg.lstsq(design, target, rcond=None)
    dof = len(units) - 2
    if dof <= 0:
        return StepSplit(None, None, "not identified: too few requests for a standard error")
    residual = float(np.sum((target - design @ np.asarray([plain, drafted])) ** 2)) / dof
    errors = np.sqrt(np.maximum(np.diag(np.linalg.pinv(design.T @ design)) * residual, 0.0))
    if plain <= 0 or drafted <= 0 or errors[0] > SPLIT_MAX_ERROR * plain or errors[1] > SPLIT_MAX_ERROR * drafted:
        return StepSplit(None, None, f"not identified: the fit over {len(units)} requests is too loose (plain "
                                     f"{plain:.2f} +- {errors[0]:.2f}, drafted {drafted:.2f} +- {errors[1]:.2f})")
    return StepSplit(float(drafted), float(plain), f"least squares over {len(units)} requests' step costs against "
                                                   f"their drafted shares (sd {spread:.2f})")


@dataclass(frozen=True, slots=True)
class SpeedupParts:
    """One row's decode speedup explained: tokens per decode step, step cost, per-position acceptance, reconciled.

    `joint[i]` is P(at least i + 1 draft tokens accepted) per drafted step; `conditional[i]` is P(i + 1 accepted |
    i accepted) (the joint's running ratio). `step_cost` is the speculative time per decode step over the baseline
    time per token; `explained` is tokens_per_step / step_cost; `measured` the pooled
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
    steps: float | None = None
    """Decode steps: output tokens less accepted draft tokens (of the samples the counts cover)."""
    split: StepSplit | None = None
    """The step cost split into steps with and without a draft, or why it is not identified."""

    @property
    def drafted_share(self) -> float | None:
        """The share of decode steps that verified a draft (drafts / decode steps)."""
        return self.drafts / self.steps if self.steps else None

    @property
    def accepted_per_draft(self) -> float:
        """Draft tokens accepted per draft (acceptance length - 1)."""
        return self.accepted / self.drafts if self.drafts > 0 else math.nan

    @property
    def tokens_per_step(self) -> float | None:
        """Tokens per decode step: 1 + drafted share x accepted per draft."""
        share = self.drafted_share
        return None if share is None else 1.0 + share * self.accepted_per_draft

    @property
    def reconciles(self) -> bool | None:
        """Whether tokens per step / step cost agrees with the measured pooled decode speedup (None: nothing to
        check)."""
        if self.explained is None or self.measured is None:
            return None if self.flag is None else False
        return self.flag is None

    def as_cells(self) -> JsonObject:
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
            "decode_steps": self.steps,
            "drafted_step_share": self.drafted_share,
            "accepted_per_draft": self.accepted_per_draft if self.drafts > 0 else None,
            "tokens_per_step": self.tokens_per_step,
            "step_cost": self.step_cost,
            "drafted_step_cost": self.split.drafted if self.split else None,
            "plain_step_cost": self.split.plain if self.split else None,
            "step_split": self.split.how if self.split else None,
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
    drafts, steps = spec.get("drafts"), spec.get("steps")
    if drafts:
        tokens = spec.get("draft_tokens")
        return float(drafts), float(spec.get("accepted") or 0.0), float(tokens) if tokens else None
    if steps:
        return float(steps), float(result.draft_n_accepted), float(result.draft_n) or None
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
        assert whole.accepted is not None  # the branch's condition
        source, partial = "run counters", whole.partial
        reported = sum(result.draft_n_accepted for result in speculative)  # the responses' own figures
        server_wide = whole.server_wide and reported > 0 \
            and abs(float(whole.accepted) - reported) > RECONCILE_TOLERANCE * max(float(whole.accepted), reported)
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
    timed = [item for item in counted if _timed(item[0])]
    if counted:  # the step cost over the samples with both counts and times, so the split pools back to it
        cost_ms, steps = sum(item[0].predicted_ms or 0.0 for item in timed), _decode_steps(timed)
    else:
        cost_ms, steps = spec_ms, spec_tokens - accepted
    step_cost = explained = measured = split = None
    share = drafts / steps if steps > 0 else None
    if base_ms > 0 and base_tokens > 0 and cost_ms > 0 and steps > 0 and share is not None:
        base_per_token = base_ms / base_tokens
        step_cost = (cost_ms / steps) / base_per_token
        explained = (1.0 + share * (accepted / drafts)) / step_cost
        measured = (spec_tokens / spec_ms) / (base_tokens / base_ms) if spec_tokens > 0 and spec_ms > 0 else None
        units = [(own_steps, counts[0], (result.predicted_ms or 0.0) / own_steps / base_per_token)
                 for result, counts, _ in timed if (own_steps := result.completion_tokens - counts[1]) > 0]
        split = split_step_cost(units, step_cost, min(1.0, share))
    mean_length = (draft_tokens / drafts) if draft_tokens else None
    flag = _flag(explained, measured, drafts=drafts, steps=steps, server_wide=server_wide, partial=partial)
    if steps <= 0 and spec_tokens > 0:  # no decode step left: the counters cannot be this row's
        flag = (f"the counters count {accepted:.0f} accepted draft tokens for {steps + accepted:.0f} output tokens: "
                "more accepted tokens than output, so the counters cover other requests or the server restarted")
    return SpeedupParts(
        category=category, source=source, drafts=drafts, accepted=accepted, draft_tokens=draft_tokens,
        acceptance_length=length, per_request=RequestAcceptance.of(lengths), joint=joint, conditional=conditional,
        step_cost=step_cost, explained=explained, measured=measured, flag=flag, mean_draft_length=mean_length,
        requests=requests, steps=steps if steps > 0 else None, split=split,
    )


def _timed(result: SampleResult) -> bool:
    return bool(result.predicted_ms and result.predicted_ms > 0 and result.completion_tokens > 0)


def _decode_steps(counted: Sequence[Counted]) -> float:
    """Decode steps of the samples: each step emits one token plus the draft tokens it accepted."""
    return sum(result.completion_tokens - counts[1] for result, counts, _ in counted)


def _flag(
    explained: float | None, measured: float | None, *, drafts: float, steps: float, server_wide: bool,
    partial: str | None,
) -> str | None:
    """Why the parts do not account for the measured speedup (counters that cover other requests or not the whole
    run, more drafts than decode steps, a gap over the tolerance), or None when they do."""
    if explained is None or measured is None or measured <= 0:
        return None
    gap = f"tokens per step / step cost {explained:.2f}x vs measured {measured:.2f}x"
    if partial:
        return f"{gap}: the counters do not cover the run ({partial})"
    if server_wide:
        return f"{gap}: the counters are server-wide and count other accepted tokens than this row's responses report"
    if drafts > (1.0 + RECONCILE_TOLERANCE) * steps:
        return (f"{gap}: the counters count {drafts:.0f} drafts in {steps:.0f} decode steps: more drafts than decode "
                "steps, so the counters cover other requests or the server restarted")
    if abs(explained / measured - 1.0) > RECONCILE_TOLERANCE:
        return f"{gap}: the counters and the generation times cover different samples"
    return None


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
