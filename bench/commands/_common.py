"""What several commands share: argument types, help texts and the progress display."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench._errors import BenchError
from bench._types import JsonObject

if TYPE_CHECKING:
    from bench.runner import Progress

SERVER_MODEL_HELP = ("GGUF the embedded server serves, or a model name: smollm2-135m-instruct (default; fetched once "
                     "from PyPI) or gemma-3-270m")


def json_object(value: str) -> JsonObject:
    """An argument that must be a JSON object."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return data


def bounded_number(option: str) -> Callable[[str], float]:
    """An argparse type for `option`: a float that is finite and within the option's range (`NUMBER_RANGES`)."""

    def parse(text: str) -> float:
        from bench.runner import checked_number

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        try:
            return checked_number(option, value)
        except BenchError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option} ")) from None

    return parse


def gate_threshold(text: str) -> float:
    """An argparse type for a gate threshold: a finite fraction strictly between 0 and 1 (0.05 = 5%)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < value < 1.0:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"{text!r}: a threshold lies between 0 and 1 (0.05 = 5%)")
    return value


def header_pair(value: str) -> tuple[str, str]:
    """A `K:V` header argument."""
    if ":" not in value:
        raise argparse.ArgumentTypeError("use K:V")
    key, _, val = value.partition(":")
    return key.strip(), val.strip()


def worker_count(value: str) -> int | None:
    """A `--workers` argument: `auto` (None: chosen from the load, docs/scaling.md) or a count >= 1."""
    if value.strip().lower() == "auto":
        return None
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is neither 'auto' nor a number of processes") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1 process (got {count})")
    return count


WORKERS_HELP = ("client processes, each sending its slice of the samples (both arms of each), joined into one run "
                "file and journal per arm (default: auto, one process until the load exceeds a measured "
                "per-process limit; docs/scaling.md)")


def progress_display(quiet: bool) -> Progress:
    """Progress on stderr: a rich display on a terminal, lines otherwise, nothing with --quiet."""
    from bench.runner import LineProgress, SilentProgress

    if quiet:
        return SilentProgress()
    if sys.stderr.isatty():
        from bench.render import RichProgress

        return RichProgress()
    from bench.render import terminal_text

    return LineProgress(lambda text: sys.stderr.write(terminal_text(text, keep_lines=True)))
