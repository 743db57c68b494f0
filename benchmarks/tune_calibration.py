"""Calibrate `speedbench tune` on synthetic truth: how often the budgeted tune picks the grid's best, on how many
requests, and how far its predictions land from the measurements (docs/tuning.md quotes the table).

    .venv/bin/python benchmarks/tune_calibration.py [--trials 200] [--per-category 10] [--seed 0]
                                                     [--drafter chain|variable]

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
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from bench.analysis import ConfigParts, Measured, Pick, decide, default_budget, fit_prediction, plan_next

GRID = tuple(range(1, 17))
TOKENS = 128
CATEGORIES = 4
TIE_MARGIN = 0.02
OVERALL = "overall"
TIMING_SIGMA = 0.04
HOPELESS_SHARE = 0.15
"""Share of trials where no draft length pays: acceptance U(0.05, 0.2), step cost a ~ U(1.15, 1.3)."""


@dataclass
class Truth:
    """One trial's true acceptance per request and step-cost line."""

    alphas: np.ndarray
    a: float
    b: float
    variable: bool

    def speedup(self, k: int) -> float:
        """The true geometric-mean decode speedup of draft length k (1.0 for k = 0)."""
        if k == 0:
            return 1.0
        lengths = (1.0 - self.alphas ** (k + 1)) / (1.0 - self.alphas)
        return float(np.exp(np.mean(np.log(lengths / (self.a + self.b * k)))))


def draw_truth(rng: np.random.Generator, per_category: int, variable: bool) -> Truth:
    """Four categories' acceptance, per-request spread, and a rising step cost."""
    hopeless = rng.random() < HOPELESS_SHARE
    centres = rng.uniform(0.05, 0.2, CATEGORIES) if hopeless else rng.uniform(0.35, 0.92, CATEGORIES)
    alphas = np.clip(np.repeat(centres, per_category) + rng.normal(0.0, 0.05, CATEGORIES * per_category), 0.05, 0.97)
    a = float(rng.uniform(1.15, 1.3) if hopeless else rng.uniform(1.0, 1.25))
    return Truth(alphas, a, float(rng.uniform(0.02, 0.15)), variable)


def measure(truth: Truth, k: int, rng: np.random.Generator) -> tuple[Measured, ConfigParts]:
    """Simulate one configuration against its baseline: per-request log speedups and the counters' parts."""
    logs, positions, requests = {}, np.zeros(k), {}
    drafts = accepted_total = draft_tokens = 0.0
    spec_ms = base_ms = tokens_total = 0.0
    for index, alpha in enumerate(truth.alphas):
        caps = rng.integers(1, k + 1, TOKENS) if truth.variable else np.full(TOKENS, k)
        accepted = np.minimum(np.floor(np.log(rng.random(TOKENS)) / math.log(alpha)), caps)
        made = np.cumsum(accepted + 1)
        steps = int(np.searchsorted(made, TOKENS) + 1)
        accepted, caps = accepted[:steps], caps[:steps]
        tokens = float(made[steps - 1])
        step_ms = (truth.a + truth.b * caps.mean()) * math.exp(rng.normal(0.0, TIMING_SIGMA))
        spec = steps * step_ms
        base = TOKENS * math.exp(rng.normal(0.0, TIMING_SIGMA))
        logs[str(index)] = math.log((tokens / spec) / (TOKENS / base))
        own = np.asarray([(accepted >= i).sum() for i in range(1, k + 1)], dtype=float)
        positions += own
        requests[str(index)] = (float(steps), tuple(own))
        drafts += steps
        accepted_total += accepted.sum()
        draft_tokens += caps.sum()
        spec_ms, base_ms, tokens_total = spec_ms + spec, base_ms + base, tokens_total + TOKENS
    step_cost = (spec_ms / drafts) / (base_ms / tokens_total)
    return Measured(k, logs), ConfigParts(k, drafts, tuple(positions), draft_tokens, step_cost, True, requests)


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


def main() -> None:
    """Run the trials and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--per-category", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drafter", choices=["chain", "variable"], default="chain")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    hits = grid_hits = agreed = configs = held = zero_truth = zero_hits = 0
    errors: list[float] = []
    for _ in range(args.trials):
        truth = draw_truth(rng, args.per_category, args.drafter == "variable")
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
    print(f"tune calibration: {n} trials, {args.drafter} drafter, grid draft_max 1..16, {CATEGORIES} categories x "
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


if __name__ == "__main__":
    main()
