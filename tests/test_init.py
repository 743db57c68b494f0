"""The public API resolves lazily and stays small."""

from __future__ import annotations

import subprocess
import sys

import pytest

import bench


def test_every_public_name_resolves() -> None:
    for name in bench.__all__:
        assert getattr(bench, name) is not None


def test_unknown_name() -> None:
    with pytest.raises(AttributeError):
        bench.nothing_here  # noqa: B018


def test_cli_import_does_not_load_heavy_modules() -> None:
    heavy = ("pandas", "numpy", "matplotlib", "aiohttp", "datasets", "rich")
    code = f"import sys, bench.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
