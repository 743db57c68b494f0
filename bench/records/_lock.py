"""The single-writer lock of a run's output: one speedbench process writes a run file and its journal at a time."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal, TextIO, TypeAlias, overload

from bench._errors import BenchError
from bench._redact import redact_known
from bench.records._layout import lock_path

TextMode: TypeAlias = Literal["w", "a", "x"]
"""The modes `open_no_follow` opens a text handle in (UTF-8)."""
BinaryMode: TypeAlias = Literal["wb", "xb", "a+b", "rb+"]
"""The modes `open_no_follow` opens a binary handle in."""


@overload
def open_no_follow(path: str | os.PathLike[str], mode: TextMode) -> TextIO: ...


@overload
def open_no_follow(path: str | os.PathLike[str], mode: BinaryMode) -> BinaryIO: ...


def open_no_follow(path: str | os.PathLike[str], mode: TextMode | BinaryMode) -> TextIO | BinaryIO:
    """Open a file for writing without following a symbolic link planted at `path` (one-line BenchError if one is).

    `mode` is "w" (truncate), "wb" (the same, binary), "a" (append), "x" (a new file only) or "a+b" (a binary
    read/append handle); the kernel refuses the link itself (O_NOFOLLOW), so a link planted between a check and
    the open cannot redirect the write to another file. What the path names must be a regular file: a FIFO or a
    device is refused in one line too (opened without blocking, so a FIFO with no reader cannot hang the write).
    """
    flags = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
             "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
             "xb": os.O_WRONLY | os.O_CREAT | os.O_EXCL, "a+b": os.O_RDWR | os.O_CREAT | os.O_APPEND,
             "rb+": os.O_RDWR}[mode]
    not_regular = BenchError(f"{path}: is not a regular file (a FIFO, a device or a folder); speedbench writes "
                             "its outputs to regular files only (remove it or choose another path)")
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise BenchError(f"{path}: is a symbolic link; speedbench does not write through one "
                             "(remove it or choose another --output)") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO nobody reads, or a folder
            raise not_regular from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise not_regular
    os.set_blocking(descriptor, True)
    if mode == "a+b" or mode == "rb+":
        return os.fdopen(descriptor, mode)
    if mode == "wb" or mode == "xb":
        return os.fdopen(descriptor, "wb")
    return os.fdopen(descriptor, "a" if mode == "a" else "w", encoding="utf-8")



def write_text_file(path: str | os.PathLike[str], text: str, *, append: bool = False) -> None:
    """Write (or append) a text output (comparison, report, step summary) with registered secrets masked, never
    through a symbolic link planted at `path`."""
    with open_no_follow(path, "a" if append else "w") as handle:
        handle.write(redact_known(text))


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
    """An open handle on `path` (never through a symbolic link) that holds its flock and is still the file the
    path names."""
    while True:
        handle = open_no_follow(path, "a+b")
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
