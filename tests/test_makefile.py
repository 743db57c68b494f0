"""The Makefile's variables reach the command they are for (checked with `make -n`, which runs nothing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _dry_run(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout


def test_category_picks_the_categories_of_make_bench() -> None:
    assert "--category coding,math" in _dry_run("bench", "CATEGORY=coding,math")
    assert "--category all" in _dry_run("bench")


def test_make_test_installs_the_mermaid_parser_it_checks_charts_with() -> None:
    assert "mermaid" in _dry_run("test")
