"""Engine-neutral speculative acceptance: counter snapshots, their deltas, acceptance length and rate."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias, TypedDict

CounterKey: TypeAlias = Literal["drafts", "draft_tokens", "accepted"]
"""The name of one acceptance counter."""
COUNTER_KEYS: tuple[CounterKey, ...] = ("drafts", "draft_tokens", "accepted")
"""The acceptance counters every engine adapter reads: draft steps, drafted tokens, accepted tokens."""


class CounterSnapshot(TypedDict, total=False):
    """An engine's cumulative acceptance counters at one moment (its /metrics), each present when exported."""

    drafts: float
    draft_tokens: float | None
    accepted: float | None
    per_position: Mapping[str, float]
    """Accepted drafts per 0-based draft position, keyed by the position as the engine labels it."""


class AcceptanceSummary(TypedDict):
    """Run-wide acceptance from counter totals, as the run file's `acceptance` object holds it."""

    source: str
    drafts: float
    draft_tokens: float | None
    accepted: float
    acceptance_length: float | None
    accept_rate: float | None
    server_wide: bool
    per_position: NotRequired[list[float]]


def counter_deltas(before: CounterSnapshot, after: CounterSnapshot) -> dict[str, float]:
    """How much each acceptance counter present in `after` moved since `before`."""
    return {key: delta for key in COUNTER_KEYS if (delta := _delta(before, after, key)) is not None}


POSITION_KEY = "accepted_pos_"
"""Prefix of a sample's per-position counter deltas in its `spec`: `accepted_pos_0` counts drafts with >= 1 accepted."""


def position_deltas(before: CounterSnapshot, after: CounterSnapshot) -> dict[str, float]:
    """How much each per-position acceptance counter moved, keyed `accepted_pos_<position>` (0-based)."""
    positions_before = before.get("per_position") or {}
    positions_after = after.get("per_position") or {}
    return {f"{POSITION_KEY}{key}": float(value) - float(positions_before.get(key, 0.0))
            for key, value in positions_after.items() if str(key).isdigit()}


def sample_positions(spec: Mapping[str, float | None]) -> tuple[float, ...]:
    """A sample's per-position counter deltas in position order (position 0 first); () when it has none."""
    if f"{POSITION_KEY}0" not in spec:
        return ()
    positions: list[float] = []
    while (value := spec.get(f"{POSITION_KEY}{len(positions)}")) is not None:
        positions.append(float(value))
    return tuple(positions)


def acceptance_summary(
    drafts: float, draft_tokens: float | None, accepted: float, *, source: str, server_wide: bool
) -> AcceptanceSummary:
    """Acceptance length (`1 + accepted / drafts`) and rate (`accepted / draft_tokens`) from counter totals."""
    return {
        "source": source,
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted": accepted,
        "acceptance_length": (1.0 + accepted / drafts) if drafts > 0 else None,
        "accept_rate": (accepted / draft_tokens) if draft_tokens else None,
        "server_wide": server_wide,
    }


def counter_acceptance(
    before: CounterSnapshot, after: CounterSnapshot, *, server_wide: bool
) -> AcceptanceSummary | None:
    """Acceptance over a run from counter snapshots {drafts, draft_tokens, accepted, per_position}."""
    deltas = counter_deltas(before, after)
    if "drafts" not in deltas or "accepted" not in deltas:
        return None
    drafts = deltas["drafts"]
    result = acceptance_summary(
        drafts, deltas.get("draft_tokens"), deltas["accepted"], source="metrics", server_wide=server_wide
    )
    positions_before = before.get("per_position") or {}
    positions_after = after.get("per_position") or {}
    if drafts > 0 and positions_after:
        keys = sorted(positions_after, key=lambda key: int(key) if str(key).isdigit() else math.inf)
        result["per_position"] = [
            (positions_after[key] - positions_before.get(key, 0.0)) / drafts for key in keys
        ]
    return result


def _delta(before: CounterSnapshot, after: CounterSnapshot, key: CounterKey) -> float | None:
    value = after.get(key)
    if value is None:
        return None
    return float(value) - float(before.get(key) or 0.0)
