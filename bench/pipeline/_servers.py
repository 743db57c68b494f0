"""The servers a comparison starts: the user's command (a fresh process group, its output kept redacted as
`baseline.log`/`spec.log`) or the embedded one; each ended on success, error, Ctrl-C, SIGTERM, SIGHUP or the
parent's death."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from bench._errors import BenchError
from bench._types import Writer
from bench.pipeline._job import ComparisonJob, ServerSide

if TYPE_CHECKING:
    from bench.server import CommandServer, EngineServer, ServerRequest

LOG_NAMES = {"baseline": "baseline.log", "speculative": "spec.log"}
"""The file that keeps a command's output, per side."""


@contextlib.contextmanager
def ended_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C (`bench.runner.stopped_like_ctrl_c`), so every started server's process
    group is ended on the way out."""
    from bench.runner import stopped_like_ctrl_c

    with stopped_like_ctrl_c():
        yield


def check_command(template: str, flag: str, **values: str | int) -> None:
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
                   out: Writer, **values: int) -> Iterator[CommandServer]:
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


def _server_request(mode: str, job: ComparisonJob) -> ServerRequest:
    """What a comparison asks of the embedded server for `mode`."""
    from bench.server import ServerRequest

    return ServerRequest(engine=job.embedded_engine, mode=mode, model=job.server.model, draft=job.server.draft,
                         threads=job.server.threads, slots=job.slots, ctx_per_slot=8192,
                         draft_max=job.server.draft_max if mode != "baseline" else None)


def command_values(job: ComparisonJob, mode: str) -> dict[str, int]:
    """The placeholders a side's command gets: `{concurrency}` always, `{draft_max}` where given (speculative)."""
    values = {"concurrency": job.slots}
    if job.server.draft_max is not None and mode != "baseline":
        values["draft_max"] = job.server.draft_max
    return values


@contextlib.contextmanager
def side_endpoint(side: str, server_side: ServerSide, mode: str, job: ComparisonJob, folder: Path,
              out: Writer) -> Iterator[tuple[str, CommandServer | EngineServer | None]]:
    """Yield (url, server or None): the given URL, the user's command started fresh, or an embedded server."""
    if server_side.url:
        yield server_side.url, None
        return
    if server_side.command:
        with command_server(server_side.command, side, folder, ready_timeout=job.server.ready_timeout,
                            api_key=job.settings.api_key, out=out, **command_values(job, mode)) as server:
            yield server.url, server
        return
    from bench.server import ServerError, engine_display_name, make_server

    try:
        embedded = make_server(_server_request(mode, job))
        out(f"speedbench: starting embedded {engine_display_name(job.embedded_engine)} server ({mode})\n")
        embedded.start()
    except (ServerError, ValueError) as exc:
        raise BenchError(str(exc)) from None
    try:
        yield embedded.url, embedded
    finally:
        embedded.stop()


def check_embedded(job: ComparisonJob) -> None:
    """Validate modes and model files of the servers to embed, before anything runs."""
    from bench.server import ServerError, make_server

    for _, side, mode in job.sides():
        if not side.embedded:
            continue
        try:
            make_server(_server_request(mode, job)).check_models()
        except (ServerError, ValueError) as exc:
            raise BenchError(str(exc)) from None
