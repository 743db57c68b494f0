"""Prometheus text parsing for the engines' server-side metrics."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Iterator[Sample]:
    """Every sample of the exposition; a malformed text is read line by line so one bad line costs only itself."""
    try:
        for family in text_string_to_metric_families(text):
            yield from family.samples
        return
    except ValueError:
        pass
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        try:
            for family in text_string_to_metric_families(line + "\n"):
                yield from family.samples
        except ValueError:
            continue


def parse_prometheus(text: str) -> Series:
    """Parse Prometheus text exposition (with `prometheus_client`'s parser) into {(name, sorted labels): value}."""
    series: Series = {}
    for sample in _samples(text):
        series[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
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
