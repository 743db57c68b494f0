"""Prompt sources: the shipped `categories/`, local SPEED-Bench-shaped files, and the SPEED-Bench hub dataset."""

from __future__ import annotations

import io
import json
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._errors import BenchError
from bench._inputs import check_regular, open_input, read_input_text
from bench._types import JsonMapping, JsonValue

HUB_DATASET = "nvidia/SPEED-Bench"
HUB_REVISION = "487aa718444e816458d1a0a52bfce7a454285cf4"
"""Pinned SPEED-Bench commit; `--revision` changes it."""
HUB_BENCHES = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
SHIPPED = "categories"
GROUNDED = "grounded"
SHIPPED_BENCHES = ("qualitative", GROUNDED)
"""The project's own prompt sets: free generation, and tasks whose answers reuse a given text (`grounded/`)."""
HUB = "speed-bench"
PLACEHOLDER_PREFIX = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"

SPEC_BENCH_CATEGORY_MAP = {
    "writing": "writing",
    "roleplay": "roleplay",
    "reasoning": "reasoning",
    "math": "math",
    "coding": "coding",
    "extraction": "rag",
    "stem": "stem",
    "humanities": "humanities",
    "translation": "multilingual",
    "summarization": "summarization",
    "qa": "qa",
    "math_reasoning": "math",
    "rag": "rag",
}
"""Spec-Bench categories onto SPEED-Bench's; the original name is kept as `sub_category`."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One prompt: its id, category and user turns (sent in order, the replies appended between them)."""

    id: str
    category: str
    turns: tuple[str, ...]
    sub_category: str | None = None
    difficulty: str | None = None


@dataclass(frozen=True)
class PromptSet:
    """Samples selected from a source, with what was skipped and why."""

    samples: tuple[Sample, ...]
    source: str
    bench: str
    categories: tuple[str, ...]
    skipped: int = 0
    placeholders: int = 0


def categories_dir() -> Path:
    """The shipped `categories/` folder (or `$SPEEDBENCH_CATEGORIES`)."""
    override = os.environ.get("SPEEDBENCH_CATEGORIES")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / SHIPPED


def _turns_from_row(row: JsonMapping) -> list[str] | None:
    turns = row.get("turns")
    if isinstance(turns, list) and turns:
        if any(turn is not None and not isinstance(turn, str) for turn in turns):
            return None  # a dict or a number is not a prompt: never send its Python repr
        clean = [turn.strip() for turn in turns if isinstance(turn, str) and turn.strip()]
        return clean or None
    messages = row.get("messages")
    if isinstance(messages, list):
        said = [message.get("content") for message in messages
                if isinstance(message, Mapping) and message.get("role") == "user"]
        clean = [content.strip() for content in said if isinstance(content, str) and content.strip()]
        return clean or None
    return None


def _is_spec_bench(rows: Sequence[JsonValue]) -> bool:
    """Spec-Bench rows have integer question ids and its own category names."""
    objects = [row for row in rows if isinstance(row, Mapping)]
    if not objects:
        return False
    ints = all(isinstance(row.get("question_id"), int) for row in objects)
    names = {row.get("category") for row in objects}
    return ints and bool(names) and names <= set(SPEC_BENCH_CATEGORY_MAP)


def rows_to_samples(rows: Iterable[JsonValue]) -> tuple[list[Sample], int, int]:
    """Normalise dataset rows (JSON values as read) to Samples; return (samples, rows skipped for unusable turns
    or for being no JSON object, placeholder rows).

    A row whose question_id repeats an earlier row's is refused (BenchError naming the ids): pairing,
    resuming and the journal all key on the id, so a silent choice between two prompts is not made.
    """
    rows = list(rows)
    spec_bench = _is_spec_bench(rows)
    samples: list[Sample] = []
    skipped = 0
    placeholders = 0
    duplicates: list[str] = []
    seen: set[str] = set()
    for row in rows:
        if not isinstance(row, Mapping):
            skipped += 1
            continue
        category = row.get("category")
        question_id = row.get("question_id", row.get("id"))
        turns = _turns_from_row(row)
        if not isinstance(category, str) or not category.strip() or question_id is None or not turns:
            skipped += 1
            continue
        if turns[0].startswith(PLACEHOLDER_PREFIX):
            placeholders += 1
            continue
        sample_id = str(question_id).strip()
        for name, text in (("question_id", sample_id), ("category", category), *(("turn", turn) for turn in turns),
                           ("sub_category", str(row.get("sub_category") or ""))):
            if not text.isascii() and _SURROGATE.search(text):
                shown = sample_id.encode("utf-8", "backslashreplace").decode("ascii", "replace")[:40]
                raise BenchError(f"row {shown!r}: its {name} holds a lone surrogate (not valid Unicode)")
        if not sample_id:
            skipped += 1
            continue
        if sample_id in seen:
            duplicates.append(sample_id)
            continue
        seen.add(sample_id)
        category = category.strip()
        sub_category = row.get("sub_category")
        if spec_bench:
            sub_category = category
            category = SPEC_BENCH_CATEGORY_MAP[category]
        samples.append(
            Sample(
                id=sample_id,
                category=category,
                turns=tuple(turns),
                sub_category=str(sub_category) if sub_category is not None else None,
                difficulty=str(row["difficulty"]) if row.get("difficulty") is not None else None,
            )
        )
    if duplicates:
        shown = ", ".join(repr(item) for item in list(dict.fromkeys(duplicates))[:5])
        raise BenchError(f"{len(duplicates)} rows repeat an earlier row's question_id ({shown}); ids must be unique")
    return samples, skipped, placeholders


MAX_ROW_BYTES = 64 * 1024 * 1024
"""A dataset row (one JSONL line) larger than this is refused, not read into memory whole."""
MAX_ROW_DEPTH = 32
"""A dataset row nested deeper than this (lists in objects in lists...) is refused: no prompt needs it."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def _depth_within(value: JsonValue, limit: int) -> bool:
    """Whether a parsed JSON value nests at most `limit` levels (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return True


def _parse_row(text: str, where: str) -> JsonValue:
    """One dataset row from JSON text, bounded in depth; a one-line BenchError naming `where` otherwise."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BenchError(f"{where}: JSON nested too deeply (a row nests at most {MAX_ROW_DEPTH} levels)") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise BenchError(f"{where}: cannot be read ({str(exc)[:120]})") from None
    if not _depth_within(row, MAX_ROW_DEPTH):
        raise BenchError(f"{where}: JSON nested too deeply (a row nests at most {MAX_ROW_DEPTH} levels)")
    return row


def _read_jsonl(path: Path) -> list[JsonValue]:
    rows = []
    with io.TextIOWrapper(open_input(path), encoding="utf-8") as handle:
        number = 0
        while line := handle.readline(MAX_ROW_BYTES + 1):
            number += 1
            if len(line) > MAX_ROW_BYTES:
                raise BenchError(f"{path}:{number}: a row longer than {MAX_ROW_BYTES} characters")
            if line.strip():
                rows.append(_parse_row(line, f"{path}:{number}"))
    return rows


def read_rows(path: Path) -> list[JsonValue]:
    """Rows of a local `.jsonl`, `.json` (a list, or an object with `rows`/`data`) or `.parquet` file."""
    if not path.exists():
        raise BenchError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            return _read_jsonl(path)
        if suffix == ".json":
            if path.stat().st_size > MAX_ROW_BYTES * 4:
                raise BenchError(f"{path}: larger than {MAX_ROW_BYTES * 4} bytes; give large datasets as .jsonl")
            data = json.loads(read_input_text(path, limit=MAX_ROW_BYTES * 4))
            if isinstance(data, dict):
                data = data.get("rows", data.get("data"))
            if not isinstance(data, list):
                raise BenchError(f"{path}: expected a JSON list of rows")
            return data
        if suffix == ".parquet":
            import pandas as pd

            check_regular(path)

            frame = pd.read_parquet(path)
            rows = frame.to_dict(orient="records")
            for row in rows:
                for key, value in row.items():
                    if hasattr(value, "tolist"):
                        row[key] = value.tolist()
            return rows
    except json.JSONDecodeError as exc:
        raise BenchError(f"{path}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BenchError(f"{path}: JSON nested too deeply to read") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BenchError(f"{path}: cannot be read ({exc})") from None
    raise BenchError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json or .parquet")


def shipped_rows(bench: str) -> list[JsonValue]:
    """Rows of a shipped set: `qualitative` from `categories/*.jsonl`, `grounded` from `categories/grounded/`."""
    if bench not in SHIPPED_BENCHES:
        raise BenchError(
            f"unknown --bench {bench!r} for the shipped categories; available benches: {', '.join(SHIPPED_BENCHES)}, "
            "throughput_1k, throughput_2k, throughput_8k, throughput_16k, throughput_32k"
        )
    folder = categories_dir() if bench == "qualitative" else categories_dir() / bench
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise BenchError(f"{folder}: no category files (*.jsonl) found")
    rows: list[JsonValue] = []
    for path in files:
        rows.extend(_read_jsonl(path))
    return rows


HUB_PROBE_TIMEOUT_S = 3.0
"""How long the hub's host may take to accept a connection before we call the machine offline."""

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _offline_requested() -> bool:
    return any(os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"} for name in _OFFLINE_VARIABLES)


def hub_unreachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """Why the hub (`$HF_ENDPOINT`, default huggingface.co) cannot be reached, or None when a connection opens."""
    from urllib.parse import urlsplit

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    host = parts.hostname or "huggingface.co"
    port = parts.port or (80 if parts.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"{host}:{port} did not answer within {timeout:.0f}s"
    except OSError as exc:
        return f"{host}:{port} is unreachable ({exc.strerror or exc.__class__.__name__})"


def hub_rows(bench: str, revision: str) -> list[JsonValue]:
    """Rows of one SPEED-Bench config from the hub; fails in seconds, on one line, when the hub is unreachable."""
    if bench not in HUB_BENCHES:
        raise BenchError(f"unknown --bench {bench!r}; available benches: {', '.join(HUB_BENCHES)}")
    offline = _offline_requested()
    if not offline:
        reason = hub_unreachable()
        if reason is not None:  # the hub client would retry for ~25 s before failing
            raise BenchError(
                f"cannot load {HUB_DATASET} ({bench}): {reason}; connect to the network, set HF_HUB_OFFLINE=1 to "
                "use a cached copy, or pass --dataset categories or a local file"
            )
    try:
        from datasets import load_dataset

        dataset = load_dataset(HUB_DATASET, name=bench, split="test", revision=revision)
    except Exception as exc:  # the hub client raises many types
        first = f"{exc}".splitlines()[0] if f"{exc}".strip() else exc.__class__.__name__
        hint = " (offline mode: no cached copy of this revision?)" if offline else ""
        raise BenchError(f"cannot load {HUB_DATASET} ({bench}, revision {revision}){hint}: {first}") from None
    return [dict(row) for row in dataset]
