"""Input files: every file speedbench reads is opened as a regular file, without blocking, up to a size limit.

A FIFO given as a run file would block its reader forever, and a link to an endless device (`/dev/zero`) would be
read until memory runs out: the file is opened non-blocking (opening a FIFO never waits for a writer), checked to
be a regular file on the descriptor it is read from (so a link swapped after a check cannot slip past), and read
to at most its limit. A link to a regular file is read as that file.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from bench._errors import BenchError

MAX_INPUT_BYTES = 2 * 2**30
"""The largest input file read whole (a run file of millions of samples fits many times over)."""

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_input(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> BinaryIO:
    """A regular file opened for reading in binary; a one-line BenchError for a FIFO, a device, a socket, a folder
    (or a link to one) and for a file over `limit` bytes. OSError (no such file, no permission) is the caller's."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise BenchError(f"{path}: is {_kind(info.st_mode)}, not a regular file; speedbench reads only files")
        if info.st_size > limit:
            raise BenchError(f"{path}: {info.st_size:,} bytes, over the {limit:,} bytes speedbench reads in such a "
                             "file")
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def read_input(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see `open_input`); a file that grows past the limit
    while read is refused too."""
    with open_input(path, limit=limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise BenchError(f"{path}: over the {limit:,} bytes speedbench reads in such a file")
    return data


def read_input_text(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (UnicodeDecodeError is the caller's)."""
    return read_input(path, limit=limit).decode("utf-8")


def check_regular(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> None:
    """Refuse what `open_input` refuses, for a reader that opens the path itself (pandas' parquet reader)."""
    open_input(path, limit=limit).close()
