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


def test_bench_picks_the_workloads_of_make_bench() -> None:
    assert "--bench qualitative " in _dry_run("bench", "BENCH=qualitative")
    default = _dry_run("bench")
    expected = "grounded,qualitative" if (ROOT / "categories" / "grounded").is_dir() else "qualitative"
    assert f"--bench {expected} " in default


def test_make_bench_samples_until_decided_unless_told_not_to() -> None:
    assert "--until-decided" in _dry_run("bench")
    assert "--until-decided" not in _dry_run("bench", "DECIDE=")


def test_make_test_installs_the_mermaid_parser_it_checks_charts_with() -> None:
    assert "mermaid" in _dry_run("test")


def test_no_skip_reason_names_a_path_outside_the_repository() -> None:
    """A skipped test says what is missing and how to get it, never where this machine keeps things."""
    import re

    for source in (ROOT / "tests").glob("*.py"):
        text = source.read_text(encoding="utf-8")
        for reason in re.findall(r"(?:skip\(|reason=)\s*f?\"([^\"]*)\"", text) + re.findall(
                r"^[A-Z_]+_MISSING = \"([^\"]*)\"", text, flags=re.M):
            assert not re.search(r"(?:^|[\s(])(?:/|\.\./|~/)", reason), f"{source.name}: {reason!r}"


def test_make_sweep_asks_for_the_output_length_docs_sweeps_states() -> None:
    import re

    docs = (ROOT / "docs" / "sweeps.md").read_text(encoding="utf-8")
    paragraph = docs[docs.index("`make sweep` (defaults:"):]
    stated = re.search(r"(\d+) tokens", paragraph[: paragraph.index("\n\n")])
    assert stated, "docs/sweeps.md no longer states make sweep's output length"
    assert f"--osl {stated.group(1)} " in _dry_run("sweep")
