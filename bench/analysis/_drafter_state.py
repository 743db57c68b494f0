"""Drafters that remember: the signature of server-side drafter state leaking between repeats of a run.

llama.cpp's `ngram-mod` keeps the n-grams of earlier requests on the server (shared by every slot; only a
restart clears it, see docs/traffic.md): repeat 1 of a prompt then drafts what repeat 0 produced, and the
speedup measures memorisation, not speculation. The signature in a run file: the same prompt drafts or has
accepted more tokens in later repeats than in repeat 0. A stateless drafter at temperature 0 repeats its
counts exactly; with sampling noise the counts move both ways, so the check is a one-sided sign test over
samples (later repeats' mean accepted tokens against repeat 0's) with a floor on the size of the rise.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from bench.records import Run

ALPHA = 0.01
"""One-sided sign-test level for "accepted drafts rose across repeats"."""
MIN_RISE = 0.2
"""The rise counts only when later repeats accept at least this share more draft tokens than repeat 0."""
MIN_SAMPLES = 7
"""Fewer samples with a change than this cannot reach ALPHA (all 7 rising: p = 1/128), nothing is concluded."""


@dataclass(frozen=True)
class DrafterState:
    """Whether a run's repeats show a drafter that remembers earlier requests, with the figures behind it."""

    label: str
    repeats: int
    samples: int
    """Samples with a successful repeat 0 and at least one later repeat."""
    rose: int
    """Samples whose later repeats accepted (or drafted) more than repeat 0."""
    fell: int
    accepted_first: float
    """Accepted draft tokens per sample in repeat 0 (mean)."""
    accepted_later: float
    """Accepted draft tokens per sample in later repeats (mean over samples of the mean over repeats)."""
    p_value: float
    remembers: bool
    """The signature holds: report repeat 0 apart; later repeats measure memorisation."""
    checked: bool
    """Whether the run could be checked at all (two or more repeats and some drafting)."""

    def message(self) -> str | None:
        """One line for every output when the signature holds (or cannot be checked on a drafting run), else None."""
        if self.remembers:
            return (f"{self.label}: the drafter remembers earlier requests: {self.rose} of {self.samples} samples "
                    f"accepted more drafts after repeat 0 ({self.accepted_first:.1f} -> {self.accepted_later:.1f} "
                    f"tokens per sample, sign test p={self.p_value:.2g}); repeats 1+ measure memorisation, "
                    "read repeat 0 apart or restart the server between repeats")
        return None


def _sign_test(rose: int, fell: int) -> float:
    """One-sided binomial p-value of at least `rose` rises among `rose + fell` changes under no direction."""
    changes = rose + fell
    if changes == 0:
        return 1.0
    return math.fsum(math.comb(changes, k) for k in range(rose, changes + 1)) / 2.0**changes


def drafter_state(run: Run, label: str = "run") -> DrafterState:
    """Check a run's repeats for the signature of a drafter that keeps state between requests."""
    by_sample: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)
    for result in run.latest:
        if result.ok:
            by_sample[result.id][result.repeat] = (result.draft_n_accepted, result.draft_n)
    repeats = max((max(reps) + 1 for reps in by_sample.values()), default=0)
    first: list[float] = []
    later: list[float] = []
    rose = fell = 0
    for reps in by_sample.values():
        if 0 not in reps or len(reps) < 2:
            continue
        accepted0, drafted0 = reps[0]
        rest = [value for repeat, value in reps.items() if repeat > 0]
        accepted_rest = sum(a for a, _ in rest) / len(rest)
        drafted_rest = sum(d for _, d in rest) / len(rest)
        first.append(float(accepted0))
        later.append(accepted_rest)
        signal = (accepted_rest - accepted0) if (accepted_rest != accepted0) else (drafted_rest - drafted0)
        rose += signal > 0
        fell += signal < 0
    samples = len(first)
    mean_first = sum(first) / samples if samples else 0.0
    mean_later = sum(later) / samples if samples else 0.0
    checked = samples > 0 and (mean_first > 0 or mean_later > 0 or rose + fell > 0)
    p_value = _sign_test(rose, fell)
    big_enough = mean_later >= (1.0 + MIN_RISE) * mean_first and mean_later - mean_first >= 1.0
    remembers = checked and rose + fell >= MIN_SAMPLES and p_value < ALPHA and big_enough
    return DrafterState(
        label=label, repeats=repeats, samples=samples, rose=rose, fell=fell, accepted_first=mean_first,
        accepted_later=mean_later, p_value=p_value, remembers=remembers, checked=checked,
    )


def first_repeat(run: Run) -> Run:
    """The run restricted to repeat 0: what a drafter that remembers measured before it had anything to remember."""
    return replace(run, results=tuple(result for result in run.results if result.repeat == 0))


def recorded_states(run: Run) -> dict[int, frozenset[str]]:
    """Per repeat: the server states its samples recorded ("restart", "kept"; "unknown" where none was)."""
    states: dict[int, set[str]] = defaultdict(set)
    for result in run.latest:
        states[result.repeat].add(result.server_state or "unknown")
    return {repeat: frozenset(values) for repeat, values in sorted(states.items())}


def state_warnings(runs: Mapping[str, Run]) -> list[str]:
    """One line per arm whose drafter remembers, and one when the arms' recorded server states differ."""
    lines = [message for label, run in runs.items() if (message := drafter_state(run, label).message())]
    described = {label: _describe(recorded_states(run)) for label, run in runs.items()}
    if len(set(described.values())) > 1:
        lines.append("the arms ran from different server states (" +
                     "; ".join(f"{label}: {text}" for label, text in described.items()) +
                     "): a drafter or prompt cache warmed by earlier requests favours the arm that kept it")
    return lines


def _describe(states: Mapping[int, frozenset[str]]) -> str:
    """`restart before every repeat`, `kept`, `unknown`, or per repeat when it varies."""
    values = set().union(*states.values()) if states else {"unknown"}
    if len(values) == 1:
        value = next(iter(values))
        return "restart before every repeat" if value == "restart" else value
    return ", ".join(f"repeat {repeat}: {'/'.join(sorted(found))}" for repeat, found in states.items())
