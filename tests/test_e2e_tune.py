"""End to end on the real embedded llama.cpp server: a tune interrupted mid-configuration resumes on new ports."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cli import main
from bench.records import load_run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["tune", "--draft-max", "4", "--category", "coding", "--limit", "3", "--osl", "32", "--quiet"]


def test_an_interrupted_tune_on_embedded_servers_resumes_and_other_settings_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    process = subprocess.Popen([sys.executable, "-m", "bench", *ARGS, "--results-dir", str(tmp_path)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            journals = list(tmp_path.glob("*/c1/draft_max-4/*.jsonl"))
            if len(journals) == 2 and all(path.read_text().count("\n") >= 2 for path in journals):
                break
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    (folder,) = tmp_path.iterdir()
    assert main([*ARGS, "--osl", "16", "--resume", str(folder)]) == 2  # another osl: refused before any server starts
    captured = capsys.readouterr()
    assert "cannot resume: osl was 32, now 16" in captured.err and "starting" not in captured.out
    assert main([*ARGS, "--resume", str(folder)]) == 0, capsys.readouterr()
    for name in ("baseline", "draft_max-4"):
        run = load_run(folder / "c1" / "draft_max-4" / f"{name}.json")
        assert len(run.results) == run.selected_samples == 3 and not run.info.interrupted
