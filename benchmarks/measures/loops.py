"""The event loop a measurement runs on: asyncio's own or uvloop's, chosen per measurement."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
from collections.abc import Iterator
from typing import Any

LOOPS = ("asyncio", "uvloop")


def loop_unavailable(name: str) -> str | None:
    """Why the named loop cannot be used here (None when it can)."""
    if name not in LOOPS:
        return f"unknown loop {name!r}; available: {', '.join(LOOPS)}"
    if name == "uvloop" and importlib.util.find_spec("uvloop") is None:
        return "uvloop is not installed (pip install uvloop)"
    return None


def runner_takes(field: str) -> bool:
    """Whether this build's RunConfig has the named setting (`loop`, `workers`)."""
    from bench.runner import RunConfig

    return field in {item.name for item in dataclasses.fields(RunConfig)}


def loop_settings(name: str) -> dict[str, Any]:
    """The RunConfig settings that select the loop, where the runner takes one (else none: the policy decides)."""
    return {"loop": name} if runner_takes("loop") else {}


@contextlib.contextmanager
def event_loop(name: str) -> Iterator[None]:
    """Within the block `asyncio.run` (the runner's) makes loops of the named kind; the old policy after."""
    reason = loop_unavailable(name)
    if reason:
        raise RuntimeError(reason)
    from bench.runner import loop_factory

    factory = loop_factory(name)

    class Policy(asyncio.DefaultEventLoopPolicy):
        """asyncio's policy, making loops of the named kind (the runner's own factory)."""

        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            """A new loop of the named kind."""
            return factory()

    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(Policy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(previous)

