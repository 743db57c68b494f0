"""The run file format: its version history, the upgrade of older files, JSON-safe values.

The records package is the only contract between running and analysing. A run file is a JSON object
that is a superset of what llama.cpp's `speed_bench.py --output` writes, so each tool reads the
other's files. Format history (`schema_version`):

- 0: a file written by llama.cpp's `speed_bench.py` (it has no `schema_version`): `config`,
  `selected_samples`, `completed_samples`, `failed_samples`, `summary`, `results`.
- 1: speedbench 0.1. Adds `schema_version`, `harness`, `started_at`, `finished_at`,
  `elapsed_s`, `engine`, `server`, `acceptance`, `warnings`, and per result `repeat`,
  `sub_category`, `outputs`, `reasoning`, `cache_n`, `ttft_s`, `itl_s`, `e2e_s`,
  `client_decode_t_s`, `error_kind`, `retries`, `spec`.
- 2: speedbench 0.2. Adds `server_description` (engine, build, model file name, slots, as the
  engine's adapter describes the server). Every 1 file is a valid 2 file: the upgrade only
  renumbers it, and readers treat the new keys as absent.
- 3: speedbench 0.3. Adds `sequential` (a run sampled until decided: the stopping rule and every look). A 2 file
  has none: it was sampled at a fixed size, so the upgrade only renumbers it.
- 4: speedbench 0.4. Adds `server_start`: what the server's /metrics said when the run began (tokens generated,
  drafted and reused from the prompt cache before the run, its process start and uptime) and the state they put it
  in (`fresh`, `served before`, `drafter warm`). A 3 file has none: its server's state is `unknown`, which the
  comparisons name but do not refuse.
- 5: the seeds are named for what they seed: `config.seed` (the arrival schedule's) is `config.arrival_seed`, and
  `interleaved.seed` (the compared arms' order) is `interleaved.order_seed`. The upgrade renames both keys.
- LOAD_VERSION (6): adds `load` (`LOAD_KEY`): the concurrency asked for, the in-flight mean the run achieved, the
  requests it covers, the interleaved turn's length and how the drain was handled (`bench.records._in_flight`).
  It is derived from the results (send times and latencies), so an older file needs no change: its `load` is
  computed from its results when read (`Run.load`) and written with the file. A recorded `load` is dropped on
  read, whatever the version: it is recomputed, never trusted.
- THINKING_SCHEMA_VERSION (7): reasoning models (`bench.records._thinking`): per sample `thinking_tokens`,
  `answer_tokens`, `thinking_source`, `answer_ttft_s`, `thinking_decode_t_s`, `answer_decode_t_s`, `chunk_segments`;
  `config.reasoning`. The upgrade sets a speedbench file's `config.reasoning` to `auto` (older runs sent no thinking
  switch; a file of llama.cpp's `speed_bench.py` keeps its keys and reads as `auto`); their samples' split is unknown.

Files of an older version are upgraded on load; unknown newer versions are refused.
The journal (`<output>.jsonl`) holds a header line and one line per finished sample, appended
and flushed as samples finish, so an interrupted run keeps its results and can be resumed.
"""

from __future__ import annotations

import math

from bench._errors import BenchError
from bench._types import JsonObject
from bench.records._thinking import THINKING_SCHEMA_VERSION, upgraded_for_thinking

# --- the `load` object: one block, so its version number can be renumbered alone ---
LOAD_VERSION = 6
LOAD_KEY = "load"
"""The run file's achieved-load object; written from the samples, never read back as truth."""
# --- end of the `load` block ---

SCHEMA_VERSION = THINKING_SCHEMA_VERSION


def finite(value: object) -> object:
    """The value with NaN and infinities (at any depth) replaced by None, for strict JSON (what a JSON encoder
    takes: objects, lists and tuples, numbers, texts, flags and None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def upgrade(data: JsonObject, source: str) -> JsonObject:
    """A parsed run file or journal header of any known version, readable as the current one (newer refused)."""
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or version < 0:
        raise BenchError(f"{source}: schema_version {version!r} is not a non-negative integer")
    if version > SCHEMA_VERSION:
        raise BenchError(
            f"{source}: written by a newer speedbench (schema_version {version} > {SCHEMA_VERSION}); upgrade speedbench"
        )
    if version == 0:
        data = dict(data)
        data.setdefault("harness", {"name": "speed_bench.py", "version": None})
        data["schema_version"] = 0
    data = {key: value for key, value in data.items() if key != LOAD_KEY}
    if version < 5:
        data = _renamed(_renamed(data, "config", "seed", "arrival_seed"), "interleaved", "seed", "order_seed")
    if 1 <= version < THINKING_SCHEMA_VERSION:
        data = upgraded_for_thinking(data)
    return data


def _renamed(data: JsonObject, section: str, old: str, new: str) -> JsonObject:
    """`data` with key `old` of its `section` object named `new` (unchanged where there is none)."""
    inner = data.get(section)
    if not isinstance(inner, dict) or old not in inner or new in inner:
        return data
    return {**data, section: {(new if key == old else key): value for key, value in inner.items()}}


