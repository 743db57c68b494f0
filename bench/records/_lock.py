"""The single-writer lock of a run's output: one speedbench process writes a run file and its journal at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from bench._errors import BenchError
from bench.records._layout import lock_path


@contextlib.contextmanager
def output_lock(output: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold an exclusive flock on `<output>.lock` for the block; another writer gets a one-line BenchError.

    The kernel drops the lock when the holder exits, however it exits, so a killed run never leaves
    a stale lock behind; the small lock file itself stays (removing it would race a waiting writer).
    """
    path = lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+b")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchError(
                f"{output}: another speedbench run is writing it (locked through {path.name}); "
                "wait for it or choose another --output"
            ) from None
        yield path
    finally:
        handle.close()
