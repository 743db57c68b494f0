"""Narrowing a server's JSON to what an adapter reads: an object under a key, a text under a key."""

from __future__ import annotations

from bench._types import JsonMapping, JsonValue


def object_at(data: JsonMapping, key: str) -> JsonMapping:
    """The JSON object under `key`, or an empty one when the key is absent or holds anything else."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def text_at(data: JsonMapping, key: str) -> str | None:
    """The string under `key`, or None when the key is absent or holds anything else."""
    value = data.get(key)
    return value if isinstance(value, str) else None


def first_object(items: JsonValue) -> JsonMapping | None:
    """The first element of a JSON array when it is an object, or None (not an array, empty, another kind)."""
    if isinstance(items, list) and items and isinstance(items[0], dict):
        return items[0]
    return None
