"""The crash-safe JSONL journal of a run: a header line, then one line per finished sample."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from bench._errors import BenchError
from bench._inputs import read_input_text
from bench._redact import redact_tree
from bench._types import JsonMapping, JsonObject
from bench.records._lock import open_no_follow
from bench.records._results import SampleResult, redacted_result, result_from_dict
from bench.records._schema import SCHEMA_VERSION, finite, upgrade

_ENCODE = json.JSONEncoder(allow_nan=False).encode
"""One encoder for every line (json.dumps with an option builds a new one per call)."""


class Journal:
    """Append-only JSONL journal of a run: a header line, then one line per finished sample."""

    def __init__(self, path: str | os.PathLike[str], header: JsonMapping, *, append: bool = False) -> None:
        """Open the journal; write the header unless appending to an existing journal."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            _drop_torn_tail(self.path)
        self._handle = open_no_follow(self.path, "a" if append else "w")
        self._last_sync = time.monotonic()
        self._syncing: threading.Thread | None = None
        if not append:
            self._write_line({"type": "header", "schema_version": SCHEMA_VERSION, **redact_tree(dict(header))})
            self._sync_beside()

    def _write_line(self, payload: JsonMapping, flush: bool = True) -> None:
        try:
            line = _ENCODE(payload)
        except ValueError:
            line = _ENCODE(finite(dict(payload)))
        self._handle.write(line + "\n")
        if flush:
            self._handle.flush()

    def flush(self) -> None:
        """Hand every appended line to the OS (from then on it survives the process); nothing once closed."""
        if not self._handle.closed:
            self._handle.flush()

    def _sync_beside(self) -> None:
        """fsync in a helper thread (os.fsync releases the GIL), unless one is still running."""
        if self._syncing is None or not self._syncing.is_alive():
            self._last_sync = time.monotonic()
            self._syncing = threading.Thread(target=os.fsync, args=(self._handle.fileno(),), daemon=True)
            self._syncing.start()

    def append(self, result: SampleResult, *, flush: bool = True) -> None:
        """Append one finished sample and flush (or leave that to `flush`); fsync at most once a second, beside.

        The line is in the OS's hands once flushed (it survives the process); fsync (2-100 ms on a busy
        VM) only guards against the machine going down, and on the runner's event loop it would stall
        every stream being timed, so it runs beside the loop in a helper thread, as does the header's.
        The runner flushes once per event-loop iteration, for every sample that finished in it.
        """
        line = redacted_result(result)
        line["type"] = "result"
        self._write_line(line, flush)
        if time.monotonic() - self._last_sync >= 1.0:
            self._sync_beside()

    def sync(self) -> None:
        """Force the journal to disk."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Sync and close the journal."""
        if self._syncing is not None:
            self._syncing.join()
        if not self._handle.closed:
            self.sync()
            self._handle.close()


def _drop_torn_tail(path: Path) -> None:
    """Cut a journal back to its last complete line, so appended lines never join a torn one."""
    with open_no_follow(path, "rb+") as handle:
        data = handle.read()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            handle.truncate(keep)


def read_journal(path: str | os.PathLike[str]) -> tuple[JsonObject, list[SampleResult]]:
    """Read a journal; a torn last line (from a crash mid-write) is ignored, other damage is an error."""
    source = str(path)
    try:
        lines = read_input_text(source).split("\n")
    except FileNotFoundError:
        raise BenchError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{source}: cannot be read ({exc})") from None
    header: JsonObject | None = None
    results: list[SampleResult] = []
    last_index = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            if index == last_index:
                break
            raise BenchError(f"{source}: line {index + 1} is not valid JSON") from None
        except RecursionError:
            raise BenchError(f"{source}: line {index + 1} is JSON nested too deeply to read") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise BenchError(f"{source}: line {index + 1} cannot be read ({str(exc)[:120]})") from None
        if not isinstance(item, dict):
            raise BenchError(f"{source}: line {index + 1} is not a JSON object")
        if item.get("type") == "header":
            header = upgrade(item, source)
        elif item.get("type") == "result":
            results.append(result_from_dict(item, f"{source}:{index + 1}"))
    if header is None:
        raise BenchError(f"{source}: not a speedbench journal (no header line)")
    return header, results




