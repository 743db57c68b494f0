"""Whether a step cost is linear in the draft length: the line's residuals against a monotone curve through the
measured configurations of one scope at one concurrency.

A mixture-of-experts target touches more experts as it verifies more tokens: at batch 1 its step cost rises steeply
and bends with K, at high batch every expert is touched already and extra tokens are nearly free. A straight line
through such a curve predicts a best K that is not, so where the line leaves the curve by more than the tolerance at
some measured K, the model names it ("step cost not linear in K") and the plan measures instead of predicting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NOT_LINEAR = "step cost not linear in K"
"""How a bending step cost is named, in the model's text and the tune's notes."""
BEND_TOLERANCE = 0.03
"""The line may leave the monotone curve by this much (relative) at a measured K before the cost is called bent:
above the step cost's own noise (a ratio of two arms' summed times over every request of a configuration)."""


def monotone_curve(costs: Sequence[float]) -> tuple[float, ...]:
    """The closest non-decreasing sequence to `costs` (pool adjacent violators, equal weights)."""
    blocks: list[list[float]] = []
    for value in costs:
        blocks.append([float(value), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return tuple(value for total, count in blocks for value in [total / count] * int(count))


@dataclass(frozen=True, slots=True)
class StepCostFit:
    """The line fitted to a scope's step costs, its residual at each measured K, and whether it bends."""

    a: float
    b: float
    residuals: tuple[tuple[int, float], ...]
    """(K, (curve - line) / line) at each measured K; the curve is the monotone fit through the measured costs."""
    curve: tuple[tuple[int, float], ...]

    @property
    def worst(self) -> tuple[int, float]:
        """The measured K where the line is farthest from the curve, and how far."""
        return max(self.residuals, key=lambda item: abs(item[1]))

    @property
    def bends(self) -> bool:
        """Whether the line leaves the curve by more than the tolerance (only three or more K can show it)."""
        return len(self.residuals) >= 3 and abs(self.worst[1]) > BEND_TOLERANCE

    @property
    def why(self) -> str:
        """`step cost not linear in K: ...` with the curve and the worst residual."""
        k, residual = self.worst
        points = ", ".join(f"{cost:.3f} (K={at})" for at, cost in self.curve)
        return (f"{NOT_LINEAR}: the measured step costs {points} leave the line {self.a:.3f} + {self.b:.4f} K by "
                f"{residual:+.1%} at K={k} (over {BEND_TOLERANCE:.0%}): a line would predict a best K that is not, so "
                "every configuration is measured instead")


def step_cost_bend(ks: Sequence[int], costs: Sequence[float]) -> StepCostFit:
    """The least-squares line through (K, cost) and its residuals against the monotone curve through them."""
    order = np.argsort(np.asarray(ks, dtype=float), kind="stable")
    xs = np.asarray(ks, dtype=float)[order]
    ys = np.asarray(costs, dtype=float)[order]
    b, a = np.polyfit(xs, ys, 1)
    curve = monotone_curve(ys.tolist())
    residuals = tuple((int(k), float((value - (a + b * k)) / (a + b * k)) if a + b * k > 0 else float("inf"))
                      for k, value in zip(xs, curve, strict=True))
    return StepCostFit(float(a), float(b), residuals, tuple((int(k), float(value)) for k, value in
                                                            zip(xs, curve, strict=True)))


def not_linear_at(why: str | None, concurrency: int) -> str | None:
    """`step cost not linear in K at concurrency C: ...` for a model refused for a bending cost, else None."""
    if why is None or not why.startswith(NOT_LINEAR):
        return None
    return f"{NOT_LINEAR} at concurrency {concurrency}{why[len(NOT_LINEAR):]}"
