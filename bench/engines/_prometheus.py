"""Prometheus text parsing for the engines' server-side metrics."""

from __future__ import annotations

import re

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> Series:
    """Parse Prometheus text exposition into {(name, sorted labels): value}; bad lines are skipped."""
    series: Series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        name, labels_text, value_text = match.groups()
        try:
            value = float(value_text)
        except ValueError:
            continue
        labels = tuple(sorted(_LABEL.findall(labels_text or "")))
        series[(name, labels)] = value
    return series


def value_of(series: Series, *names: str) -> float | None:
    """The unlabelled value of the first name present (with or without a `_total` suffix)."""
    for name in names:
        for candidate in (name, f"{name}_total"):
            total = [value for (key, _), value in series.items() if key == candidate]
            if total:
                return float(sum(total))
    return None


def by_label(series: Series, label: str, *names: str) -> dict[str, float]:
    """Values of the first name present keyed by one label's value (e.g. `position`), summed over other labels."""
    for name in names:
        for candidate in (name, f"{name}_total"):
            found: dict[str, float] = {}
            for (key, labels), value in series.items():
                if key == candidate:
                    position = dict(labels).get(label, "")
                    found[position] = found.get(position, 0.0) + value  # e.g. one series per vLLM engine
            if found:
                return found
    return {}
