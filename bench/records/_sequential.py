"""Sampling until decided, as a run file records it: the stopping rule and every look it took.

A run sampled by `bench --until-decided` carries this record under the `sequential` key of both arms' run files, so
`compare`, `report` and `regress` re-read the same stopping look and never treat the run as one of a fixed size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from bench._types import JsonObject, JsonValue

LOOK_DECISIONS = ("faster", "slower", "equivalent", "continue", "undecided")
"""What a look decides: a verdict (faster, slower, equivalent), go on sampling, or undecided at the limit."""
FASTER, SLOWER, EQUIVALENT, CONTINUE, UNDECIDED = LOOK_DECISIONS


def level_text(share: float) -> str:
    """A confidence level as a reader reads it: one decimal (`96.9%`, `95%`), more only where one would round a
    level under 100% up to it (`99.95%`)."""
    for digits in range(1, 5):
        text = f"{share:.{digits}%}"
        if share >= 1.0 or float(text[:-1]) < 100.0:
            break
    return text.replace(".0%", "%") if text.endswith(".0%") else text


@dataclass(frozen=True, slots=True)
class Look:
    """One look: samples so far, the level spent on it, the interval it read and what it decided."""

    n: int
    level: float
    point: float
    low: float
    high: float
    decision: str

    @property
    def confidence(self) -> float:
        """The two-sided level of the look's interval (1 - the error budget it spent)."""
        return 1.0 - self.level

    @property
    def has_interval(self) -> bool:
        """Whether the look read an interval (enough samples and budget)."""
        return self.level > 0 and math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def stops(self) -> bool:
        """Whether sampling stops at this look (decided, or undecided at the limit)."""
        return self.decision != CONTINUE

    @property
    def reason(self) -> str:
        """Why sampling stopped or goes on, in one sentence."""
        interval = (f"{self.point:.2f}x [{self.low:.2f}, {self.high:.2f}] at {level_text(self.confidence)}"
                    if self.has_interval else "no interval at this look (too few samples)")
        if self.decision in (FASTER, SLOWER):
            return f"decided {self.decision} after {self.n} samples: {interval} excludes 1.00x"
        if self.decision == EQUIVALENT:
            return f"decided equivalent after {self.n} samples: {interval} lies inside the threshold"
        if self.decision == UNDECIDED:
            return f"undecided at the limit of {self.n} samples: {interval}"
        return f"continuing after {self.n} samples: {interval}"

    def to_dict(self) -> JsonObject:
        """The look as a JSON object (NaN and infinite bounds are written as null by the run file)."""
        return {"n": self.n, "level": self.level, "confidence": self.confidence, "point": self.point,
                "low": self.low, "high": self.high, "decision": self.decision}

    @classmethod
    def from_mapping(cls, data: JsonValue) -> Look | None:
        """Read one look of a run file; None when it is not one."""
        if not isinstance(data, Mapping) or data.get("decision") not in LOOK_DECISIONS:
            return None
        n, level = _real(data.get("n")), _real(data.get("level"))
        if n is None or level is None or n < 0 or not 0.0 <= level < 1.0:
            return None
        bounds = [_real(data.get(key)) for key in ("point", "low", "high")]
        point, low, high = (math.nan if value is None else value for value in bounds)
        if data.get("high") is None and data.get("low") is not None:  # an unbounded interval written as null
            high = math.inf
        return cls(int(n), level, point, low, high, str(data["decision"]))


def _real(value: JsonValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True, slots=True)
class SequentialStop:
    """How a run was sampled until decided: the stopping rule (method, error budget, threshold, limit) and every
    look in order, the last being the one that ended sampling (or, for an interrupted run, the last one taken)."""

    method: str
    metric: str
    alpha: float
    threshold: float
    max_samples: int
    rounds: int
    per_round: int
    looks: tuple[Look, ...] = ()

    @property
    def last(self) -> Look | None:
        """The last look taken."""
        return self.looks[-1] if self.looks else None

    @property
    def finished(self) -> bool:
        """Whether the test ended sampling (decided, or undecided at the limit) rather than being interrupted."""
        return self.last is not None and self.last.decision != CONTINUE

    def to_dict(self) -> JsonObject:
        """The run file's `sequential` object."""
        return {"method": self.method, "metric": self.metric, "alpha": self.alpha, "threshold": self.threshold,
                "max_samples": self.max_samples, "rounds": self.rounds, "per_round": self.per_round,
                "looks": [look.to_dict() for look in self.looks]}

    @classmethod
    def from_mapping(cls, data: JsonValue) -> SequentialStop | None:
        """Read a run file's `sequential` object; None when absent. Unreadable looks are dropped."""
        if not isinstance(data, Mapping):
            return None
        numbers = {key: _real(data.get(key)) for key in ("alpha", "threshold", "max_samples", "rounds", "per_round")}
        looks = data.get("looks")
        return cls(
            method=str(data.get("method") or "unknown"),
            metric=str(data.get("metric") or "decode_speedup"),
            alpha=numbers["alpha"] if numbers["alpha"] is not None and 0 < numbers["alpha"] < 1 else 0.05,
            threshold=numbers["threshold"] if numbers["threshold"] is not None else math.nan,
            max_samples=int(numbers["max_samples"] or 0),
            rounds=int(numbers["rounds"] or 0),
            per_round=int(numbers["per_round"] or 0),
            looks=tuple(look for look in (Look.from_mapping(item) for item in looks) if look is not None)
            if isinstance(looks, list) else (),
        )
