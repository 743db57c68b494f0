"""Embedded llama.cpp HTTP server (xllamacpp) run in a child process, for end-to-end benchmarks.

The server runs in ``bench/_child.py`` under its own session (so a terminal Ctrl-C reaches
only this process, which then stops the child). The child dies with its parent: it watches its
stdin pipe (EOF when the parent exits, however it exits) and its parent pid, and when started from
the main thread it also sets PR_SET_PDEATHSIG (the watchdogs cannot run while xllamacpp loads the
model, which holds the GIL). Every started server is also stopped from an atexit hook
(``weakref.finalize``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Self

from bench.server._child import ChildConfig
from bench.server._models import ModelError, resolve_model

__all__ = [
    "MODES", "RESET_BY_RESTART", "STATEFUL_MODES", "EmbeddedServer", "ServerConfig", "ServerError",
    "default_model_path", "model_path",
]

log = logging.getLogger(__name__)

MODES = ("baseline", "ngram-mod", "ngram-simple", "draft")

STATEFUL_MODES = frozenset({"ngram-mod"})
"""Modes whose drafter keeps state across requests on the server (shared by every slot; POST
/slots/N?action=erase and `cache_prompt: false` leave it, only a restart clears it: docs/traffic.md)."""

RESET_BY_RESTART = "restart"
"""How an embedded server is brought back to its starting state: a fresh process (the only reset that clears
ngram-mod's memory; it also empties the prompt cache and every slot)."""

HOST = "127.0.0.1"
GGUF_MAGIC = b"GGUF"
_CHILD_SCRIPT = Path(__file__).with_name("_child.py")
_BIND_ERROR_MARK = "couldn't bind"
_LOG_KEEP = 200


class ServerError(Exception):
    """Embedded server failed: bad model file, failed start, died."""


def default_model_path() -> Path:
    """Path of the default model's GGUF (SmolLM2-135M-Instruct), fetched and verified once if needed."""
    return model_path(None)


def model_path(value: str | os.PathLike[str] | None) -> Path:
    """A model name or GGUF path as a path; a named model is fetched (once) and verified, else ServerError."""
    try:
        return resolve_model(value)
    except ModelError as exc:
        raise ServerError(str(exc)) from None


REASONING_FORMATS = ("deepseek", "deepseek_legacy", "none", "auto")
"""llama.cpp's `--reasoning-format` values: where the server puts a model's thoughts."""


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one embedded llama.cpp server."""

    mode: str = "baseline"  # one of MODES
    model_path: Path | str | None = None  # a GGUF path or a model name (MODELS); None -> default_model_path()
    draft_model_path: Path | str | None = None  # for mode "draft" (path or name); None -> same GGUF as the model
    n_threads: int = 1
    ctx_size: int = 4096  # total KV context, shared by the n_parallel slots
    n_parallel: int = 1  # server slots
    draft_max: int = 16  # n_max draft tokens (ngram / draft modes)
    port: int | None = None  # None -> a free port
    seed: int = 42
    chat_template: str | None = None  # a Jinja chat template replacing the model's (None: the model's own)
    reasoning_format: str | None = None  # where thoughts go: deepseek (reasoning_content), none, auto (None: default)

    def __post_init__(self) -> None:
        """Reject unknown modes and out-of-range numbers."""
        if self.mode not in MODES:
            raise ValueError(f"unknown server mode {self.mode!r}; expected one of: {', '.join(MODES)}")
        for name in ("n_threads", "ctx_size", "n_parallel", "draft_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.port is not None and not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1..65535, got {self.port!r}")
        if self.reasoning_format not in (None, *REASONING_FORMATS):
            raise ValueError(f"unknown reasoning format {self.reasoning_format!r}; expected one of: "
                             f"{', '.join(REASONING_FORMATS)}")


def _check_gguf(path: Path, what: str) -> Path:
    """Return `path` resolved if it is a readable GGUF file, else raise ServerError."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ServerError(f"{what} not found: {path}")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ServerError(f"{what} is not readable: {path}: {exc.strerror or exc}") from exc
    if magic != GGUF_MAGIC:
        raise ServerError(f"{what} is not a GGUF file (bad magic {magic!r}): {path}")
    return path.resolve()


def port_is_free(port: int) -> bool:
    """True if a server could listen on 127.0.0.1:port now (SO_REUSEADDR: TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _read_tail(path: Path, n: int) -> list[str]:
    """Last `n` lines of a text file (empty list if it does not exist)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-n:] if n > 0 else []


def _kill_child(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Close the child's stdin, SIGTERM its process group, SIGKILL it after `timeout`, reap it."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            log.warning("embedded server pid %d ignored SIGTERM; killing it", proc.pid)
    # The group may hold stragglers even if the leader exited: make sure nothing survives.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _finalize(proc: subprocess.Popen[bytes], workdir: str) -> None:
    """Last-resort cleanup run at interpreter exit or when the server object is collected."""
    _kill_child(proc, 2.0)
    shutil.rmtree(workdir, ignore_errors=True)


class ServerProcess:
    """What the embedded servers share: a child process with its work folder and log, stopped at most once."""

    kind = "embedded server"
    """How errors name this kind of server."""

    def __init__(self) -> None:
        """No process yet: nothing is spawned until start()."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: str | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes], str], ServerProcess] | None = None
        self._url: str | None = None
        self._log_lines: list[str] = []
        self.start_seconds: float | None = None  # wall time of the last successful start()

    @property
    def url(self) -> str:
        """Base URL such as "http://127.0.0.1:PORT" (valid after start)."""
        if self._url is None:
            raise ServerError(f"the {self.kind} has not been started")
        return self._url

    @property
    def pid(self) -> int | None:
        """Pid of the child process (the vLLM server's process group id), or None if not started."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 120.0) -> None:
        """Start the server (each kind of server knows how)."""
        raise NotImplementedError

    def _terminate(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """End the child process (each kind of server knows how)."""
        raise NotImplementedError

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after `timeout`), keep its log tail, delete its work folder."""
        proc, workdir = self._proc, self._workdir
        if proc is None:
            return
        self._terminate(proc, timeout)
        if workdir is not None:
            self._log_lines = _read_tail(Path(workdir) / "server.log", _LOG_KEEP)
            shutil.rmtree(workdir, ignore_errors=True)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._proc, self._workdir, self._finalizer, self._url = None, None, None, None

    def is_running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, n: int = 20) -> list[str]:
        """Last `n` lines the child wrote to stdout/stderr (kept after stop())."""
        if self._workdir is not None:
            return _read_tail(Path(self._workdir) / "server.log", n)
        return self._log_lines[-n:] if n > 0 else []

    def __enter__(self) -> Self:
        """Start the server."""
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop the server."""
        self.stop()


class EmbeddedServer(ServerProcess):
    """A llama.cpp server running in a child process on 127.0.0.1."""

    def __init__(self, config: ServerConfig) -> None:
        """Remember the config; nothing is spawned until start()."""
        super().__init__()
        self.config = config
        self.restarts = 0
        """How many times restart() brought the server back to its starting state."""

    def check_models(self) -> tuple[Path, Path | None]:
        """Validate the model (and draft) files before anything is spawned."""
        cfg = self.config
        if cfg.model_path is not None:
            model = _check_gguf(model_path(cfg.model_path), "model file")
        else:
            model = _check_gguf(default_model_path(), "default model file")
        draft: Path | None = None
        if cfg.mode == "draft" and cfg.draft_model_path is not None:
            draft = _check_gguf(model_path(cfg.draft_model_path), "draft model file")
        elif cfg.mode == "draft":
            draft = model
        return model, draft

    def start(self, timeout: float = 120.0) -> None:
        """Spawn the child and wait until GET /health returns 200; raise ServerError on failure."""
        if self.is_running():
            return
        self.stop()  # clean up after a child that died on its own
        t0 = time.monotonic()
        model, draft = self.check_models()
        port = self.config.port
        if port is not None and not port_is_free(port):  # an explicit port is used or refused, never swapped
            raise ServerError(f"port {port} is taken on {HOST}; choose another --port or omit it for a free one")
        deadline = t0 + timeout
        try:
            self._spawn_and_wait(model, draft, port or 0, deadline)
        except _PortTaken:
            raise ServerError(f"port {port} was taken while the server started; choose another --port") from None
        self.start_seconds = time.monotonic() - t0
        log.info("embedded %s server ready at %s in %.2fs", self.config.mode, self._url, self.start_seconds)

    def _spawn_and_wait(self, model: Path, draft: Path | None, port: int, deadline: float) -> None:
        """One start attempt on `port` (0 = let the OS choose); raises _PortTaken or ServerError."""
        workdir = tempfile.mkdtemp(prefix="speedbench-server-")
        log_path = Path(workdir) / "server.log"
        ready_path = Path(workdir) / "ready.json"
        settings = self.config
        cfg = ChildConfig(
            mode=settings.mode, model_path=str(model), draft_model_path=str(draft) if draft else None,
            n_threads=settings.n_threads, ctx_size=settings.ctx_size, n_parallel=settings.n_parallel,
            draft_max=settings.draft_max, seed=settings.seed, host=HOST, port=port, parent_pid=os.getpid(),
            # PDEATHSIG fires when the spawning *thread* exits: only safe from the main thread.
            pdeathsig=threading.current_thread() is threading.main_thread(),
            chat_template=settings.chat_template, reasoning_format=settings.reasoning_format,
        )
        argv = [sys.executable, "-P", str(_CHILD_SCRIPT), json.dumps(cfg), str(ready_path)]
        with log_path.open("wb") as log_fh:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=log_fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group; terminal Ctrl-C only hits the parent
                    close_fds=True,
                    cwd=workdir,
                )
            except OSError as exc:
                shutil.rmtree(workdir, ignore_errors=True)
                raise ServerError(f"cannot spawn the embedded server: {exc}") from exc
        self._proc, self._workdir, self._log_lines = proc, workdir, []
        self._finalizer = weakref.finalize(self, _finalize, proc, workdir)  # also runs at exit
        try:
            self._url = self._wait_ready(proc, ready_path, log_path, deadline)
        except BaseException:
            tail = self.log_tail(20)
            self.stop()
            if any(_BIND_ERROR_MARK in line for line in tail) and port != 0:
                raise _PortTaken from None
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], ready: Path, log_path: Path, deadline: float) -> str:
        """Poll until the child wrote its URL and /health says 200; return the URL."""
        url: str | None = None
        while True:
            code = proc.poll()
            if code is not None:
                tail = " | ".join(_read_tail(log_path, 8)) or "(no output)"
                raise ServerError(f"embedded server exited with code {code} during start: {tail}")
            if url is None and ready.is_file():
                url = json.loads(ready.read_text(encoding="utf-8"))["url"].rstrip("/")
            if url is not None and _http_status(url, "/health", 1.0) == 200:
                return url
            if time.monotonic() > deadline:
                tail = " | ".join(_read_tail(log_path, 8)) or "(no output)"
                raise ServerError(f"embedded server not healthy after the start timeout: {tail}")
            time.sleep(0.05)

    def _terminate(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """SIGTERM the child, SIGKILL it after `timeout`."""
        _kill_child(proc, timeout)

    @property
    def keeps_drafter_state(self) -> bool:
        """Whether this server's drafter remembers earlier requests (so repeats and levels need a restart)."""
        return self.config.mode in STATEFUL_MODES

    def restart(self, timeout: float = 120.0) -> None:
        """Bring the server back to its starting state: stop it and start a fresh process on the same port."""
        port = self.config.port
        if port is None and self._url is not None:
            port = int(self._url.rsplit(":", 1)[1])
        self.stop()
        self.restarts += 1
        if port is None:
            self.start(timeout)
            return
        config = self.config
        self.config = replace(config, port=port)
        try:
            self.start(timeout)
        finally:
            self.config = config

    def __repr__(self) -> str:
        """Mode, URL and state, for logs."""
        state = "running" if self.is_running() else "stopped"
        return f"EmbeddedServer(mode={self.config.mode!r}, url={self._url!r}, {state})"


class _PortTaken(Exception):
    """Internal: the child could not bind its port."""


def _http_status(url: str, path: str, timeout: float) -> int | None:
    """HTTP status of GET `path` on base `url` (no proxies), or None if the connection failed."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or HOST, parts.port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return int(resp.status)
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
