"""A server the user's own command starts: its log is redacted once it stops, and a link at the log is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import BenchError, command_secrets
from bench.server import CommandServer

SECRET = "sk-live-0123456789abcdef"


def _command(tmp_path: Path) -> str:
    www = tmp_path / "www"
    www.mkdir(exist_ok=True)
    (www / "health").write_text("ok\n")
    script = (f"echo starting with --api-key {SECRET}; echo token={SECRET}; echo plain {SECRET} here; "
              f"exec {sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {www}")
    return f"sh -c '{script}' server --api-key {SECRET}"


def test_the_values_of_secret_named_options_are_found_in_either_spelling() -> None:
    assert command_secrets(["srv", "--api-key", "abc12345", "--hf-token=xyz98765", "--port", "80"]) == [
        "abc12345", "xyz98765"]
    assert command_secrets(["srv", "--api-key", "--verbose", "--model", "m.gguf"]) == []


def test_a_user_server_log_keeps_no_secret_once_the_server_stops(tmp_path: Path) -> None:
    log = tmp_path / "tune" / "baseline.log"
    server = CommandServer(_command(tmp_path), log, ready_timeout=30)
    server.start()
    try:
        assert server.is_running()
        assert all(SECRET not in line for line in server.log_tail())
    finally:
        server.stop()
    text = log.read_text()
    assert "starting with --api-key ***" in text and "token=***" in text and "plain" in text
    assert SECRET not in text and SECRET[:8] not in text
    assert not list(log.parent.glob("*.redacting"))


def test_a_link_planted_at_the_log_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    log = tmp_path / "baseline.log"
    log.symlink_to(target)
    with pytest.raises(BenchError, match="symbolic link"):
        CommandServer(_command(tmp_path), log, ready_timeout=5).start()
    assert target.read_text() == "keep\n"
