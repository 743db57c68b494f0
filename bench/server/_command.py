"""A server the user's own command starts: kept (`_keeper`), output kept in a log file, readiness probed.

The command is a template: `{port}` (a free loopback port chosen here), `{draft_max}` and `{concurrency}` are
filled in per configuration. The command and every process it started are ended (SIGTERM, then SIGKILL) when
the server stops, when the interpreter exits, and (the command itself) when this process is killed. The values of
the command's secret-named options are registered as secrets, and the log file is redacted once the server has
stopped, however it stopped (a server that echoes its command line or a token would otherwise leave it in the
results folder).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import string
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from bench._redact import command_secrets, redact, register_secrets
from bench.records import open_no_follow
from bench.server._embedded import ServerError
from bench.server._keeper import Kept

SECRET_PIECE = 8
"""The shortest piece of a secret-named option's value registered on its own (a placeholder name is shorter)."""
READY_PATHS = ("/health", "/v1/models")
"""What readiness is probed on, in order: llama.cpp's /health, then any OpenAI server's model list."""


def free_port() -> int:
    """A loopback port the OS says is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill_command(template: str, **values: int | str) -> list[str]:
    """The template's words with `{port}`, `{draft_max}`, `{concurrency}` filled in; a bad template is an error.

    A placeholder is one of the given names alone: an index, attribute, conversion or format (`{port[0]}`,
    `{port.real}`, `{port!r}`, `{port:>8}`), a positional `{}` and an unknown name are refused. The secrets of
    the template (secret-named options' values, with any brace token's inside) are registered before anything
    is said about it.
    """
    known = ", ".join("{" + key + "}" for key in values)
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise ServerError(f"server command {template!r}: {exc} (quote it as a shell would)") from None
    register_secrets(_brace_secrets(command_secrets(words), values))
    filled = []
    for word in words:
        parts: list[str] = []
        try:
            for literal, name, spec, conversion in string.Formatter().parse(word):
                parts.append(literal)
                if name is None:
                    continue
                if name not in values or spec or conversion:
                    shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
                    raise ServerError(f"server command {template!r}: {redact(shown)} is not a placeholder "
                                      f"(placeholders, each alone: {known}; a literal brace is {{{{ or }}}})")
                parts.append(str(values[name]))
        except ValueError as exc:
            raise ServerError(f"server command {template!r}: {exc} (placeholders: {known}; a literal brace is "
                              "{{ or }})") from None
        filled.append("".join(parts))
    return filled


def _brace_secrets(found: list[str], names: Iterable[str]) -> list[str]:
    """Each secret value, and each piece of it between the characters of a placeholder (`{sk-...}` gives `sk-...`)."""
    pieces = [piece for value in found for piece in re.split(r"[{}\[\].!:]", value)]
    return found + [piece for piece in pieces if len(piece) >= SECRET_PIECE and piece not in names]


class CommandServer:
    """One server started from a command template, stopped with its whole process group."""

    def __init__(self, template: str, log_path: Path, *, ready_timeout: float = 120.0, api_key: str | None = None,
                 **values: int | str) -> None:
        """Prepare (nothing starts until `start`); `api_key` fills `{api_key}` and is sent on the readiness probes."""
        if "{port}" not in template:
            raise ServerError(f"server command {template!r} has no {{port}}: the server must listen where asked")
        self.port = free_port()
        if api_key is not None:
            values["api_key"] = api_key
            register_secrets([api_key])
        self.template = template
        self.argv = fill_command(template, port=self.port, **values)
        register_secrets(command_secrets(self.argv))
        self.api_key = api_key
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self.kept: Kept | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the command (kept: see `_keeper`), output to the log file, and wait until it answers.

        Whatever ends the wait (a failure, Ctrl-C, a stop signal) ends the server and redacts its log first.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open_no_follow(self.log_path, "a+b") as log:  # a link planted at the log's path is refused
            try:
                self.kept = Kept(self.argv, log)
            except OSError as exc:
                raise ServerError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None
        try:
            self._wait_ready(self.kept)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, kept: Kept) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if kept.process.poll() is not None:
                raise ServerError(f"server command exited with {kept.process.returncode} before answering; "
                                  f"its output: {self.log_path}")
            if self._answers():
                return
            time.sleep(0.2)
        raise ServerError(f"server command did not answer on {self.url} within {self.ready_timeout:g} s; "
                          f"its output: {self.log_path}")

    def _answers(self) -> bool:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        for path in READY_PATHS:
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + path, headers=headers),
                                            timeout=2.0) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError, ValueError):
                continue
        return False

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The command's process (None before `start`)."""
        return self.kept.process if self.kept is not None else None

    def is_running(self) -> bool:
        """Whether the command's process is still alive."""
        return self.kept is not None and self.kept.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """End the command with every descendant: SIGTERM, then SIGKILL after `timeout` seconds; redact its log."""
        if self.kept is None:
            return
        try:
            self.kept.end(timeout)
        finally:
            self._redact_log()

    def _redact_log(self) -> None:
        """Rewrite the stopped server's log with every secret masked (nothing writes to it any more)."""
        try:
            raw = self.log_path.read_bytes()
        except OSError:
            return
        text = raw.decode("utf-8", errors="surrogateescape")
        masked = "\n".join(redact(line) for line in text.split("\n"))
        if masked != text:
            temporary = self.log_path.with_name(self.log_path.name + ".redacting")
            with open_no_follow(temporary, "wb") as handle:
                handle.write(masked.encode("utf-8", errors="surrogateescape"))
            os.replace(temporary, self.log_path)

    def log_tail(self, n: int = 20) -> list[str]:
        """The last lines of the command's output."""
        try:
            return [redact(line) for line in self.log_path.read_text(errors="replace").splitlines()[-n:]]
        except OSError:
            return []
