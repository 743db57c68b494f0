"""The single-writer lock of a run's output: one speedbench process writes a run file and its journal at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from bench._errors import BenchError
from bench.records._layout import lock_path


@contextlib.contextmanager
def output_lock(output: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold an exclusive flock on `<output>.lock` for the block; another writer gets a one-line BenchError.

    The kernel drops the lock when the holder exits, however it exits, so a killed run never leaves a
    stale lock behind. A run that ends removes the lock file while it still holds the lock; a writer that
    opened the file before it was removed finds, once it has the lock, that the path no longer names the
    file it locked, and locks the new one instead: two writers never both hold a lock.
    """
    path = lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = _locked(path, output)
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        handle.close()


def _locked(path: Path, output: str | os.PathLike[str]) -> BinaryIO:
    """An open handle on `path` that holds its flock and is still the file the path names."""
    while True:
        handle = open(path, "a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise BenchError(
                f"{output}: another speedbench run is writing it (locked through {path.name}); "
                "wait for it or choose another --output"
            ) from None
        try:
            if os.path.samestat(os.fstat(handle.fileno()), os.stat(path)):
                return handle
        except FileNotFoundError:
            pass
        handle.close()  # the previous holder removed this file between our open and our lock: take the new one
