"""Calibrate `speedbench tune` on synthetic truth: how often the budgeted tune picks the grid's best, on how many
requests, and how far its predictions land from the measurements (docs/tuning.md quotes the table).

    .venv/bin/python benchmarks/tune_calibration.py [--trials 200] [--per-category 10] [--seed 0]
                                                     [--drafter chain|variable] [--truth dense|moe]

Each trial draws a truth (15% of them hopeless: acceptance U(0.05, 0.2), a ~ U(1.15, 1.3), no K pays): four
categories with chain acceptance alpha_c ~ U(0.35, 0.92) (P(at least i accepted) = alpha^i, each request's alpha =
alpha_c + N(0, 0.05)), a step cost rising with K, cost(K) = a + b K with a ~ U(1.0, 1.25) and b ~ U(0.02, 0.15),
and lognormal timing noise (sigma 0.04 per request and arm). A configuration is measured by simulating each
request's 128 tokens step by step (counters per position, drafts, generation time) against its own baseline. The
truth of K is exp(mean over requests of log(E_K(alpha) / cost(K))).

The budgeted tune (`plan_next`: the grid's extremes, then the predicted best and its neighbours) and a full grid
(every K measured) both pick through `decide`. A pick is right when its true speedup is within the tie margin (2%)
of the grid's true best (0, the baseline, counts 1.00x). `--drafter variable` draws drafts of random length: the
model must refuse to predict (then the tune measures the whole grid). Seeded: the same command prints the same table.

`--truth` sets how the step cost moves with K and the load (concurrency 1, 16 and 64; the cost is relative to the
baseline's time per token at the same load):

- dense (default): cost(K, C) = a + b K (C ** 0.35): linear in K, steeper under load, so the optimum falls with load;
- moe: cost(K, C) = a + s(C) (1 - exp(-K / kappa)) + b K, s(C) = s1 / (1 + C / 4), s1 ~ U(0.8, 2.0), kappa ~ U(3, 10),
  b ~ U(0.005, 0.02): a mixture-of-experts target, where each verified token touches more experts until all are
  (steep and bending at batch 1, nearly free at batch 64), so the optimum rises with load.

The second table runs the tune as `speedbench tune` does at every level (the budgeted plan, then the configurations
each reported scope still needs for its pick to be proven: overall at each level, the categories at concurrency 1)
and scores every reported pick: right (within the tie margin of the scope's true best), not proven (said "best
measured; predicted best K=... not measured", shipped nowhere) and misleading (shown as proven, yet not right).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from bench.analysis import (
    NOT_SEPARABLE,
    ConfigParts,
    Measured,
    Pick,
    cover_scopes,
    decide,
    default_budget,
    fit_prediction,
    plan_next,
    prove,
)

GRID = tuple(range(1, 17))
TOKENS = 128
CATEGORIES = 4
TIE_MARGIN = 0.02
OVERALL = "overall"
TIMING_SIGMA = 0.04
HOPELESS_SHARE = 0.15
"""Share of trials where no draft length pays: acceptance U(0.05, 0.2), step cost a ~ U(1.15, 1.3)."""
LEVELS = (1, 16, 64)
"""The concurrency levels of the scope-and-load table."""
DENSE_LOAD_POWER = 0.35
"""Dense truth: the per-token verification cost grows as C ** this with the load."""


@dataclass
class Truth:
    """One trial's true acceptance per request and step cost (linear, or a mixture of experts' bending curve)."""

    alphas: np.ndarray
    a: float
    b: float
    variable: bool
    moe: tuple[float, float] | None = None
    """(s1, kappa) of a mixture-of-experts cost; None for a dense (linear) one."""

    def cost(self, k: float, level: int = 1) -> float:
        """The step cost of draft length k at concurrency `level`, relative to the baseline's time per token."""
        if self.moe is None:
            return self.a + self.b * k * level ** DENSE_LOAD_POWER if level > 1 else self.a + self.b * k
        rise, kappa = self.moe
        return self.a + rise / (1.0 + level / 4.0) * (1.0 - math.exp(-k / kappa)) + self.b * k

    def speedup(self, k: int, level: int = 1, members: np.ndarray | None = None) -> float:
        """The true geometric-mean decode speedup of draft length k (1.0 for k = 0) over `members` (all requests)."""
        if k == 0:
            return 1.0
        alphas = self.alphas if members is None else self.alphas[members]
        lengths = (1.0 - alphas ** (k + 1)) / (1.0 - alphas)
        return float(np.exp(np.mean(np.log(lengths / self.cost(k, level)))))


def draw_truth(rng: np.random.Generator, per_category: int, variable: bool, kind: str = "dense") -> Truth:
    """Four categories' acceptance, per-request spread, and a step cost of the kind asked for."""
    hopeless = rng.random() < HOPELESS_SHARE
    centres = rng.uniform(0.05, 0.2, CATEGORIES) if hopeless else rng.uniform(0.35, 0.92, CATEGORIES)
    alphas = np.clip(np.repeat(centres, per_category) + rng.normal(0.0, 0.05, CATEGORIES * per_category), 0.05, 0.97)
    a = float(rng.uniform(1.15, 1.3) if hopeless else rng.uniform(1.0, 1.25))
    if kind == "moe":
        moe = (float(rng.uniform(0.8, 2.0)), float(rng.uniform(3.0, 10.0)))
        return Truth(alphas, float(rng.uniform(1.0, 1.15)) if not hopeless else a, float(rng.uniform(0.005, 0.02)),
                     variable, moe)
    return Truth(alphas, a, float(rng.uniform(0.02, 0.15)), variable)


@dataclass
class RequestSim:
    """One simulated request of a configuration: its log speedup, steps, per-position counts and times."""

    log: float
    steps: float
    own: np.ndarray
    draft_tokens: float
    spec_ms: float
    base_ms: float


def simulate(truth: Truth, k: int, rng: np.random.Generator, level: int = 1) -> list[RequestSim]:
    """Each request of one configuration at one load, simulated step by step against its baseline."""
    records = []
    for alpha in truth.alphas:
        caps = rng.integers(1, k + 1, TOKENS) if truth.variable else np.full(TOKENS, k)
        accepted = np.minimum(np.floor(np.log(rng.random(TOKENS)) / math.log(alpha)), caps)
        made = np.cumsum(accepted + 1)
        steps = int(np.searchsorted(made, TOKENS) + 1)
        accepted, caps = accepted[:steps], caps[:steps]
        tokens = float(made[steps - 1])
        step_ms = truth.cost(float(caps.mean()), level) * math.exp(rng.normal(0.0, TIMING_SIGMA))
        spec = steps * step_ms
        base = TOKENS * math.exp(rng.normal(0.0, TIMING_SIGMA))
        own = np.asarray([(accepted >= i).sum() for i in range(1, k + 1)], dtype=float)
        records.append(RequestSim(math.log((tokens / spec) / (TOKENS / base)), float(steps), own,
                                  float(caps.sum()), spec, base))
    return records


def view(records: list[RequestSim], k: int, members: range | None = None) -> tuple[Measured, ConfigParts]:
    """One scope's view of a simulated configuration (its requests `members`; all by default)."""
    chosen = range(len(records)) if members is None else members
    logs = {str(i): records[i].log for i in chosen}
    requests = {str(i): (records[i].steps, tuple(records[i].own)) for i in chosen}
    drafts = sum(records[i].steps for i in chosen)
    positions = np.sum([records[i].own for i in chosen], axis=0)
    draft_tokens = sum(records[i].draft_tokens for i in chosen)
    step_cost = (sum(records[i].spec_ms for i in chosen) / drafts) / (sum(records[i].base_ms for i in chosen)
                                                                        / (TOKENS * len(chosen)))
    return Measured(k, logs), ConfigParts(k, drafts, tuple(positions), draft_tokens, step_cost, True, requests)


def measure(truth: Truth, k: int, rng: np.random.Generator, level: int = 1) -> tuple[Measured, ConfigParts]:
    """Simulate one configuration against its baseline: per-request log speedups and the counters' parts."""
    return view(simulate(truth, k, rng, level), k)


def budgeted(truth: Truth, rng: np.random.Generator) -> tuple[int | None, int, list[float], bool]:
    """The budgeted tune: (pick, configurations measured, prediction errors, whether the model held)."""
    measured: dict[int, tuple[Measured, ConfigParts]] = {}
    errors: list[float] = []
    held = True
    prediction = None
    while True:
        wanted = plan_next(GRID, measured, prediction, budget=default_budget(GRID) if held else None)
        if not wanted:
            break
        for k in wanted:
            measured[k] = measure(truth, k, rng)
            predicted = prediction.speedup(k) if prediction is not None and prediction.holds else None
            if predicted is not None:
                point = math.exp(float(np.mean(list(measured[k][0].logs.values()))))
                errors.append(abs(predicted - point) / point)
        prediction = fit_prediction(parts for _, parts in measured.values())
        held = held and prediction.holds
    pick = decide({(OVERALL, 1): [item[0] for item in measured.values()]}, tie_margin=TIE_MARGIN)[(OVERALL, 1)]
    return pick.draft_max, len(measured), errors, held


def full_grid(truth: Truth, rng: np.random.Generator) -> Pick:
    """Every K of the grid measured, then the same decision."""
    configs = [measure(truth, k, rng)[0] for k in GRID]
    return decide({(OVERALL, 1): configs}, tie_margin=TIE_MARGIN)[(OVERALL, 1)]


def agrees(pick: int | None, grid: Pick) -> bool:
    """Whether the budgeted pick is the full grid's, or one of the leaders the full grid cannot tell apart."""
    return pick is not None and (pick == grid.draft_max or pick in grid.tied)


def right(truth: Truth, pick: int | None) -> bool:
    """Whether the pick's true speedup is within the tie margin of the grid's true best (or the baseline's 1.00x)."""
    if pick is None:
        return False
    best = max([1.0, *(truth.speedup(k) for k in GRID)])
    return truth.speedup(pick) * (1.0 + TIE_MARGIN) >= best


@dataclass
class ScopeOutcome:
    """One reported pick of a scoped tune: its scope, whether it is right, proven, and what it cost."""

    scope: str
    right: bool
    proven: bool
    separable: bool
    """False where the pick says its leaders are "not separable at this n" (it claims no best)."""
    speculate: bool
    """Whether the pick is a draft length (not 0, "no configuration is shown faster: do not speculate")."""

    checked: bool = True
    """Whether the tune ran with the checks; without them every pick is shown as proven."""

    @property
    def shown_proven(self) -> bool:
        """Whether the output shows the pick as proven (every pick, without the checks)."""
        return self.proven or not self.checked

    @property
    def misleading(self) -> bool:
        """A draft length shown as a proven, separated best, yet not within the tie margin of the scope's true best."""
        return self.shown_proven and self.separable and self.speculate and not self.right

    @property
    def missed(self) -> bool:
        """"Do not speculate" (no draft length shown faster) where one gains more than the tie margin."""
        return self.shown_proven and not self.speculate and not self.right


def _scope_members(per_category: int) -> dict[str, range | None]:
    """Each reported scope's requests: overall (all) and each category's."""
    return {OVERALL: None, **{f"category {c}": range(c * per_category, (c + 1) * per_category)
                              for c in range(CATEGORIES)}}


def scoped_tune(truth: Truth, rng: np.random.Generator, per_category: int, *, checks: bool = True,
                ) -> tuple[list[ScopeOutcome], int, int]:
    """The tune at every level as `speedbench tune` runs it: (each reported pick scored, configurations measured,
    levels whose step cost the model named not linear). With `checks` off, the tune as it was before scopes were
    proven and the step cost checked: the overall plan alone, every pick taken as proven, the line never refused."""
    from bench.analysis import _step_cost

    tolerance = _step_cost.BEND_TOLERANCE
    if not checks:
        _step_cost.BEND_TOLERANCE = math.inf
    try:
        members = _scope_members(per_category)
        measured: dict[int, dict[int, list[RequestSim]]] = {}
        bends = 0
        for level in LEVELS:
            sims = measured.setdefault(level, {})
            prediction = None
            budget: int | None = default_budget(GRID)
            while True:
                wanted = plan_next(GRID, sims, prediction, budget=budget)
                if not wanted and checks:
                    scopes = {scope: fit_prediction(view(sims[k], k, rows)[1] for k in sims)
                              for scope, rows in members.items() if level == LEVELS[0] or scope == OVERALL}
                    wanted = tuple(sorted({k for ks in cover_scopes(GRID, sims, scopes).values() for k in ks}))
                if not wanted:
                    break
                for k in wanted:
                    sims[k] = simulate(truth, k, rng, level)
                prediction = fit_prediction(view(records, k)[1] for k, records in sims.items())
                if not prediction.holds and budget is not None:
                    bends += (prediction.why or "").startswith("step cost not linear")
                    budget = None
        families = [{(OVERALL, level): [view(records, k)[0] for k, records in measured[level].items()]
                     for level in LEVELS},
                    {(scope, LEVELS[0]): [view(records, k, rows)[0] for k, records in measured[LEVELS[0]].items()]
                     for scope, rows in members.items() if scope != OVERALL}]
        outcomes = []
        for family in families:
            for (scope, level), pick in decide(family, tie_margin=TIE_MARGIN).items():
                rows = members[scope]
                sims = measured[level]
                proof = prove(GRID, sims, fit_prediction(view(records, k, rows)[1] for k, records in sims.items()))
                best = max([1.0, *(truth.speedup(k, level, rows) for k in GRID)])
                chosen = pick.draft_max
                right_pick = chosen is not None and truth.speedup(chosen, level, rows) * (1.0 + TIE_MARGIN) >= best
                name = f"overall at concurrency {level}" if scope == OVERALL else "categories at concurrency 1"
                outcomes.append(ScopeOutcome(name, right_pick, proof.proven, NOT_SEPARABLE not in pick.reason,
                                             bool(chosen), checks))
        return outcomes, sum(len(sims) for sims in measured.values()), bends
    finally:
        _step_cost.BEND_TOLERANCE = tolerance


def scope_table(args: argparse.Namespace) -> None:
    """The second table: every reported scope and load, with and without the checks."""
    rng = np.random.default_rng(args.seed + 1)
    rows: dict[str, list[tuple[ScopeOutcome, ScopeOutcome]]] = {}
    configs = old_configs = bends = rises = 0
    for _ in range(args.trials):
        truth = draw_truth(rng, args.per_category, args.drafter == "variable", args.truth)
        seed = int(rng.integers(1 << 31))
        checked, count, bent = scoped_tune(truth, np.random.default_rng(seed), args.per_category)
        unchecked, old_count, _ = scoped_tune(truth, np.random.default_rng(seed), args.per_category, checks=False)
        for new, old in zip(checked, unchecked, strict=True):
            rows.setdefault(new.scope, []).append((new, old))
        configs, old_configs, bends = configs + count, old_configs + old_count, bends + bent
        best = {level: max(GRID, key=lambda k, level=level: truth.speedup(k, level))
                for level in (LEVELS[0], LEVELS[-1])}
        rises += best[LEVELS[-1]] > best[LEVELS[0]]
    n = args.trials
    print()
    print(f"every scope and load: {args.truth} truth, concurrency {', '.join(map(str, LEVELS))}, the same trials' "
          "tune with the checks (scopes proven, step cost checked) and without them")
    print()
    print("| scope | picks | right | not proven (said so) | not separable at this n (said so) | "
          "do not speculate, yet a K gains | misleading: a K shown proven and best, not right | "
          "without the checks: shown proven, predicted best not measured | misleading without the checks |")
    print("|---|---|---|---|---|---|---|---|---|")
    everything = []
    for scope, pairs in rows.items():
        everything += pairs
        print(_scope_row(scope, pairs))
    print(_scope_row("every reported pick", everything))
    print()
    share = configs / (n * len(LEVELS) * len(GRID))
    print(f"configurations measured: {share:.1%} of every level's full grid (without the checks "
          f"{old_configs / (n * len(LEVELS) * len(GRID)):.1%}); levels whose step cost was named not linear: "
          f"{bends / (n * len(LEVELS)):.1%}; trials whose true optimum rises from concurrency {LEVELS[0]} to "
          f"{LEVELS[-1]}: {rises / n:.1%}")


def _scope_row(scope: str, pairs: list[tuple[ScopeOutcome, ScopeOutcome]]) -> str:
    total = len(pairs)
    right = sum(new.right for new, _ in pairs)
    unproven = sum(not new.proven for new, _ in pairs)
    tied = sum(new.proven and not new.separable for new, _ in pairs)
    missed = sum(new.missed for new, _ in pairs)
    misleading = sum(new.misleading for new, _ in pairs)
    old = sum(old.misleading for _, old in pairs)
    unmeasured = sum(not old.proven for _, old in pairs)
    return (f"| {scope} | {total} | {right / total:.1%} | {unproven / total:.1%} | {tied / total:.1%} | "
            f"{missed / total:.1%} | {misleading / total:.1%} | {unmeasured / total:.1%} | {old / total:.1%} |")


def main() -> None:
    """Run the trials and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--per-category", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drafter", choices=["chain", "variable"], default="chain")
    parser.add_argument("--truth", choices=["dense", "moe"], default="dense")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    hits = grid_hits = agreed = configs = held = zero_truth = zero_hits = 0
    errors: list[float] = []
    for _ in range(args.trials):
        truth = draw_truth(rng, args.per_category, args.drafter == "variable", args.truth)
        pick, count, trial_errors, model_held = budgeted(truth, rng)
        hits += right(truth, pick)
        grid = full_grid(truth, rng)
        grid_hits += right(truth, grid.draft_max)
        agreed += agrees(pick, grid)
        configs += count
        held += model_held
        errors += trial_errors
        if max(truth.speedup(k) for k in GRID) < 1.0:
            zero_truth += 1
            zero_hits += pick == 0
    n = args.trials
    requests = configs / (n * len(GRID))
    print(f"tune calibration: {n} trials, {args.drafter} drafter, {args.truth} truth, grid draft_max 1..16, "
          f"{CATEGORIES} categories x "
          f"{args.per_category} requests per configuration, tie margin {TIE_MARGIN:.0%}, seed {args.seed}")
    print()
    print("| measure | budgeted tune | full grid |")
    print("|---|---|---|")
    print(f"| pick equals the full grid's, or is among its tied leaders | {agreed / n:.1%} | 100% |")
    print(f"| pick within the tie margin of the true best | {hits / n:.1%} | {grid_hits / n:.1%} |")
    print(f"| requests (share of the full grid's) | {requests:.1%} | 100% |")
    print(f"| trials where the model held | {held / n:.1%} | - |")
    median = f"{np.median(errors):.2%}" if errors else "n/a (no prediction made)"
    print(f"| median prediction error ({len(errors)} predicted, then measured) | {median} | - |")
    print(f"| trials where no K pays: picked 0 | {zero_hits}/{zero_truth} | - |")
    scope_table(args)


if __name__ == "__main__":
    main()
