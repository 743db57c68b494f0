"""Processes started for a run never outlive it: every descendant of a kept command is found and ended.

A kept command runs in its own process group and session, with a token in its environment that its
descendants inherit. This process becomes a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so a
descendant that leaves the group (`setsid`, a daemon's double fork) is re-parented here instead of to init
and stays findable as ours. Ending a kept command ends its group and every process that carries its token:
SIGTERM, then SIGKILL after a grace period. The kernel ends the command itself when this process dies by a
signal nothing can catch (`PR_SET_PDEATHSIG` set in the child before it runs the command), and every kept
command still alive is ended when the interpreter exits.

The one case not covered: a descendant that left the group, when this process is killed with SIGKILL
(nothing runs then; the command's leader gets its parent-death signal, its escaped descendants do not).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

TOKEN_VARIABLE = "SPEEDBENCH_KEPT"
"""The environment variable that marks every descendant of a kept command with its token."""
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_LIVE: dict[str, Kept] = {}


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, bound before any fork (a child calls it between fork and exec), or None off Linux."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); whether it now is one."""
    return _PRCTL is not None and _PRCTL(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _die_with_parent(parent: int) -> Callable[[], None]:
    """What the child runs before the command: SIGKILL when `parent` dies (and now, if it already did)."""
    prctl = _PRCTL

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request above was made
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def marked(token: str) -> list[int]:
    """The live processes (not zombies) whose environment carries `token`."""
    needle = f"{TOKEN_VARIABLE}={token}".encode() + b"\0"
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes() + b"\0" and not _zombie(int(environ.parent.name)):
                found.append(int(environ.parent.name))
        except (OSError, ValueError):
            continue
    return found


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _signal(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap(pids: Sequence[int]) -> None:
    """Collect the exit status of those `pids` that are (adopted) children of this process."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


class Kept:
    """A command started in its own session, marked, ended with every descendant (see the module)."""

    def __init__(self, argv: Sequence[str], stdout: IO[bytes]) -> None:
        """Start `argv` (stdin empty, stdout and stderr to `stdout`); OSError when it cannot start."""
        become_subreaper()
        self.token = secrets.token_hex(8)
        env = {**os.environ, TOKEN_VARIABLE: self.token}
        self.process = subprocess.Popen(list(argv), stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, env=env, preexec_fn=_die_with_parent(os.getpid()))
        _LIVE[self.token] = self

    @property
    def pid(self) -> int:
        """The command's process id (also its process group's and session's)."""
        return self.process.pid

    def end(self, timeout: float = 10.0) -> None:
        """SIGTERM the group and every marked process, SIGKILL what is left after `timeout` seconds."""
        _LIVE.pop(self.token, None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        _signal(marked(self.token), signal.SIGTERM)
        deadline = time.monotonic() + timeout
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        while (left := marked(self.token)) and time.monotonic() < deadline:
            _reap(left)
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # children that outlived the leader
        _signal(marked(self.token), signal.SIGKILL)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        deadline = time.monotonic() + 1.0
        while (left := marked(self.token)) and time.monotonic() < deadline:
            _reap(left)
            time.sleep(0.02)

    def kill_now(self) -> None:
        """SIGKILL the group and every marked process at once (the interpreter is exiting)."""
        _LIVE.pop(self.token, None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        _signal(marked(self.token), signal.SIGKILL)


def _end_all() -> None:
    for kept in list(_LIVE.values()):
        kept.kill_now()


atexit.register(_end_all)
