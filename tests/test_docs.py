"""The README stays a newcomer's page, its links resolve, and no file reads like a development log."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVELOPMENT_LOG = re.compile(
    r"\bthis (?:session|round)\b|\b(?:session|round)'s (?:final|last|changes?|code)\b|\bdesign card\b"
    r"|(?<!vLLM )(?<!llama\.cpp )(?<!pull request )\bissue #?\d+\b|\bround \d+ of\b",
    re.IGNORECASE,
)
"""Wording about how the code came to be (a session, a round, an issue number of this project), not what it is."""


TEXT_SUFFIXES = frozenset({".py", ".md", ".yml", ".toml", ".mjs", ".json", ".jsonl", ".ipynb", ""})


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    skip = ("results/sample/", "tests/data/", "tests/mermaid/package-lock.json")
    files = []
    for name in listed.stdout.splitlines():
        path = ROOT / name
        if name.startswith(skip) or path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        files.append(path)
    return files


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 250


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to a missing {target}"


def test_the_readme_quotes_a_real_make_bench_run() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## A real `make bench`", 1)[1].split("\n## ", 1)[0]
    assert "speedbench: decision: " in section and "Paired statistics" in section
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", section) and re.search(r"\d-core", section)  # when, on what machine


def test_no_file_reads_like_a_development_log() -> None:
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in _tracked_text_files()
             for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if DEVELOPMENT_LOG.search(line)]
    assert not found, "\n".join(found)
