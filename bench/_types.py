"""Types shared by every stage: a JSON value as read from a server or a file, before an adapter types it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeAlias

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""One JSON value: what `json.loads` returns and what a run file's writer accepts."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object built to be written: a run file's section, a document's payload."""

JsonMapping: TypeAlias = "Mapping[str, JsonValue]"
"""A JSON object as read: a server's response body or a file's section, before an adapter types what it needs."""


class Writer(Protocol):
    """Where a command writes its output, one text at a time: `print`, a stream's `write`, a list's `append`."""

    def __call__(self, text: str, /) -> object:
        """Write one text."""
