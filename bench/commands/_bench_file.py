"""`bench --config FILE.toml`: a PR's benchmark of several pairs in one file, read and checked in one place.

Top-level keys are `bench`'s long options with `_` for `-` (`osl = 4096`, `category = "coding,rag"`), and
`api_key_env` names the environment variable holding the key (never the key itself); each `[[pair]]` has a `name`,
`base_url` or `base_cmd`, `spec_url` or `spec_cmd`, and may override any top-level key. Options given on the
command line override the file. Every fault is one line naming the key and the pair, before any server starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from bench._errors import BenchError
from bench._types import JsonObject, JsonValue
from bench.commands._common import json_object
from bench.commands._options import given_options

if TYPE_CHECKING:
    from bench.pipeline import PairsConfig, PipelineConfig

NOT_IN_FILE = frozenset({"help", "config", "resume", "quiet", "given_options", "api_key"})
"""Options a config file cannot set: the command's own, and the key (a file names its variable: api_key_env)."""
FILE_ONLY = ("results_dir", "label", "title")
"""Keys of the whole file that a pair cannot override."""
KEY_ENV = "api_key_env"
TomlValue: TypeAlias = "str | int | float | bool | list[TomlValue] | TomlTable | dt.date | dt.time | dt.datetime"
"""A value `tomllib` reads."""
TomlTable: TypeAlias = "dict[str, TomlValue]"
OptionValue: TypeAlias = "str | int | float | bool | JsonObject | tuple[str, str] | list[OptionValue] | None"
"""An option's value as its own parsing gives it: text, a number, a flag, a JSON object, a header pair, or a list
of them (a repeated option's)."""
PAIR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A pair's name: its results folder's name, so letters, digits, `.`, `_` and `-` only."""


def _options(add_arguments: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.Action]:
    """`bench`'s options by destination, as its parser (`add_arguments`) declares them."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return {action.dest: action for action in parser._actions if action.option_strings}


def _is_flag(action: argparse.Action) -> bool:
    return isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction)


def _kind(action: argparse.Action) -> str:
    """What a key's value must be, in words."""
    if _is_flag(action):
        return "true or false"
    if isinstance(action, argparse._AppendAction):
        return "a list of strings"
    if action.type is json_object:
        return "a table (or a JSON object in a string)"
    if action.type is int:
        return "an integer"
    if action.type is None:
        return "a string"
    return "a number or a string"


def _parser(action: argparse.Action) -> Callable[[str], OptionValue] | None:
    """The option's own parsing of a text, None for an option that keeps the text (every `type` of bench's options
    is a function)."""
    parse = action.type
    if parse is None:
        return None
    if isinstance(parse, argparse.FileType) or not callable(parse):
        raise TypeError(f"option {action.dest!r}: its type {parse!r} is not a parsing function")
    return parse


def _json_value(value: TomlValue) -> JsonValue:
    """A TOML value as JSON; ValueError for a date or time, which JSON has no value for."""
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dt.date | dt.time):
        raise ValueError("expected a JSON value, not a date or time")
    return value


def _converted(action: argparse.Action, value: TomlValue) -> OptionValue:
    """A file's value as the option's own parsing gives it; ValueError (its message) when it cannot be."""
    parse = _parser(action)
    if _is_flag(action):
        if not isinstance(value, bool):
            raise ValueError(f"expected {_kind(action)}")
        return value
    if isinstance(action, argparse._AppendAction):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"expected {_kind(action)}")
        return [parse(item) if parse else item for item in value if isinstance(item, str)]
    if action.type is json_object and isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    if action.type is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected {_kind(action)}")
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float) or (
            parse is None and not isinstance(value, str)):
        raise ValueError(f"expected {_kind(action)}")
    result = parse(str(value)) if parse is not None else value
    if action.choices is not None and result not in action.choices:
        raise ValueError(f"expected one of {', '.join(map(str, action.choices))}")
    return result


def _read_table(table: TomlTable, options: dict[str, argparse.Action], where: str,
                *, pair: bool) -> dict[str, OptionValue]:
    """A table's keys checked and converted (`where` prefixes every fault)."""
    values: dict[str, OptionValue] = {}
    for key, value in table.items():
        if key == "pair" and not pair:
            continue
        if key == "name" and pair:
            continue
        if key == "api_key":
            raise BenchError(f"{where}the file may not hold a key (found 'api_key' there); name the environment "
                             "variable that holds it with api_key_env")
        if key == KEY_ENV:
            if not isinstance(value, str) or not value:
                raise BenchError(f"{where}key {KEY_ENV!r}: expected the name of an environment variable")
            values[KEY_ENV] = value
            continue
        if key in FILE_ONLY and pair:
            raise BenchError(f"{where}key {key!r}: is the whole file's, not a pair's")
        action = options.get(key)
        if action is None or key in NOT_IN_FILE:
            raise BenchError(f"{where}unknown key {key!r} (keys are bench's long options with _ for -)")
        try:
            values[key] = _converted(action, value)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise BenchError(f"{where}key {key!r}: {str(exc) or 'bad value'} (got {value!r:.80})") from None
    return values


def read_pairs(args: argparse.Namespace, build: Callable[[argparse.Namespace], PipelineConfig],
               add_arguments: Callable[[argparse.ArgumentParser], None]) -> PairsConfig:
    """The pairs of `args.config`, each a pipeline built by `build` from the file's keys, its pair's and the
    command line's given options (in that order of strength); `add_arguments` declares the keys (bench's options)."""
    from bench.pipeline import Pair, PairsConfig

    path = Path(args.config)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchError(f"--config {path}: {(exc.strerror or str(exc)).lower()}") from None
    except UnicodeDecodeError:
        raise BenchError(f"--config {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"--config {path}: not valid TOML: {exc}") from None
    options = _options(add_arguments)
    top = _read_table(data, options, f"{path}: ", pair=False)
    tables = data.get("pair")
    if not isinstance(tables, list) or not tables or not all(isinstance(table, dict) for table in tables):
        raise BenchError(f"{path}: no [[pair]] tables (each with name, base_url or base_cmd, spec_url or spec_cmd)")
    given = given_options(args)
    command_line = {key: value for key, value in vars(args).items() if key in given}
    pairs, names = [], set()
    for index, table in enumerate(tables, start=1):
        name = table.get("name")
        if not isinstance(name, str) or not PAIR_NAME.fullmatch(name):
            raise BenchError(f"{path}: pair {index}: key 'name': expected a name of letters, digits, '.', '_', '-' "
                             f"(got {name!r:.80})")
        where = f"{path}: pair {name!r}: "
        if name in names:
            raise BenchError(f"{where}key 'name': two pairs have this name")
        names.add(name)
        merged = {**top, **_read_table(table, options, where, pair=True)}
        for flag in ("base", "spec"):
            if not (merged.get(f"{flag}_url") or merged.get(f"{flag}_cmd") or command_line.get(f"{flag}_url")
                    or command_line.get(f"{flag}_cmd")):
                raise BenchError(f"{where}key '{flag}_url' or '{flag}_cmd': the pair needs its {flag} side")
            if merged.get(f"{flag}_url") and merged.get(f"{flag}_cmd"):
                raise BenchError(f"{where}keys '{flag}_url' and '{flag}_cmd': give one for the {flag} side")
        key_env = merged.pop(KEY_ENV, None)
        if isinstance(key_env, str) and "api_key" not in given:
            if key_env not in os.environ:
                raise BenchError(f"{where}key {KEY_ENV!r}: the environment variable {key_env!r} is not set")
            merged["api_key"] = os.environ[key_env]
        values = argparse.Namespace(**{**vars(args), **merged, **command_line, "resume": None})
        try:
            pairs.append(Pair(name, build(values)))
        except BenchError as exc:
            raise BenchError(f"{where}{exc}") from None
    title = _text(top, "title") if "title" in top and "title" not in given else args.title
    return PairsConfig(pairs=tuple(pairs), title=title,
                       label=command_line.get("label") or _text(top, "label") or path.stem,
                       results_dir=command_line.get("results_dir") or _text(top, "results_dir") or args.results_dir,
                       resume=args.resume)


def _text(values: Mapping[str, OptionValue], key: str) -> str | None:
    """A text option's value in a table (its parsing keeps text), None when the table has none."""
    value = values.get(key)
    return value if isinstance(value, str) else None
