"""The servers a comparison starts: the user's command (a fresh process group, its output kept redacted as
`baseline.log`/`spec.log`) or the embedded one; each ended on success, error, Ctrl-C, SIGTERM, SIGHUP or the
parent's death."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench._errors import BenchError

LOG_NAMES = {"baseline": "baseline.log", "speculative": "spec.log"}
"""The file that keeps a command's output, per side."""


@contextlib.contextmanager
def ended_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so every started server's process group is ended on the way out."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_command(template: str, flag: str, **values: Any) -> None:
    """Refuse a server command without `{port}` or with a placeholder it will not get, in one line."""
    from bench.server import ServerError, fill_command

    if "{port}" not in template:
        raise BenchError(f"{flag} {template!r} has no {{port}}: the server must listen where asked")
    try:
        fill_command(template, port=1, **values)
    except ServerError as exc:
        raise BenchError(f"{flag}: {exc}") from None


@contextlib.contextmanager
def command_server(template: str, side: str, where: Path, *, ready_timeout: float, api_key: str | None,
                   out: Callable[[str], Any], **values: Any) -> Iterator[Any]:
    """A server started from the user's command for one side, stopped (its whole process group) on the way out."""
    from bench.server import CommandServer, ServerError

    try:
        server = CommandServer(template, where / LOG_NAMES[side], ready_timeout=ready_timeout, api_key=api_key,
                               **values)
        out(f"speedbench: starting the {side} server from its command\n")
        server.start()
    except ServerError as exc:
        raise BenchError(f"the {side} server: {exc}") from None
    try:
        yield server
    finally:
        server.stop()
