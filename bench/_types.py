"""Types shared by every stage: a JSON value as read from a server or a file, before an adapter types it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeAlias, TypeGuard

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""One JSON value: what `json.loads` returns and what a run file's writer accepts."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object built to be written: a run file's section, a document's payload."""

JsonMapping: TypeAlias = "Mapping[str, JsonValue]"
"""A JSON object as read: a server's response body or a file's section, before an adapter types what it needs."""


def is_str_list(value: object) -> TypeGuard[list[str]]:
    """Whether a value read from JSON is a list of strings (an empty list is one)."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class Writer(Protocol):
    """Where a command writes its output, one text at a time: `print`, a stream's `write`, a list's `append`."""

    def __call__(self, text: str, /) -> object:
        """Write one text."""
