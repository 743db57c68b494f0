"""JSON values checked by what they hold: typed fields of an object read back, a typed record as a JSON value."""

from __future__ import annotations

from collections.abc import Mapping

from bench._errors import BenchError
from bench._types import JsonMapping, JsonValue


def json_value(value: object) -> JsonValue:
    """`value` as the JSON value it holds (mappings with text keys and lists or tuples copied, scalars as they are);
    TypeError for anything else, as `json.dumps` would refuse it."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        copied: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a JSON object's key must be text, not {key!r}")
            copied[key] = json_value(item)
        return copied
    if isinstance(value, list | tuple):
        return [json_value(item) for item in value]
    raise TypeError(f"{type(value).__name__} is no JSON value")


def _wrong(key: str, value: JsonValue, kind: str) -> BenchError:
    """The one-line error for a field that holds another kind of value."""
    return BenchError(f"{key!r} must be {kind}, not {value!r}")


def whole_field(data: JsonMapping, key: str, default: int) -> int:
    """`data[key]` as a whole number (`default` when absent)."""
    value = data.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _wrong(key, value, "a whole number")


def optional_whole_field(data: JsonMapping, key: str) -> int | None:
    """`data[key]` as a whole number, None when absent or null."""
    value = data.get(key)
    return None if value is None else whole_field(data, key, 0)


def number_field(data: JsonMapping, key: str, default: float) -> float:
    """`data[key]` as a number (`default` when absent); a whole number is kept as it is."""
    value = data.get(key, default)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise _wrong(key, value, "a number")


def optional_number_field(data: JsonMapping, key: str) -> float | None:
    """`data[key]` as a number, None when absent or null."""
    value = data.get(key)
    return None if value is None else number_field(data, key, 0.0)


def text_field(data: JsonMapping, key: str, default: str) -> str:
    """`data[key]` as text (`default` when absent)."""
    value = data.get(key, default)
    if isinstance(value, str):
        return value
    raise _wrong(key, value, "text")


def optional_text_field(data: JsonMapping, key: str) -> str | None:
    """`data[key]` as text, None when absent or null."""
    value = data.get(key)
    return None if value is None else text_field(data, key, "")


def object_field(data: JsonMapping, key: str) -> JsonMapping:
    """`data[key]` as a JSON object (empty when absent)."""
    value = data.get(key, {})
    if isinstance(value, dict):
        return value
    raise _wrong(key, value, "an object")
