"""The run settings of one arm: the one place a pipeline builds a `RunConfig`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.runner import RunConfig


def arm_config(*, url: str, label: str, tags: Mapping[str, str], **shared: Any) -> RunConfig:
    """One arm's settings: its endpoint, label and the tags describing its server, plus the settings arms share."""
    return RunConfig(url=url, label=label, tags=tags, **shared)
