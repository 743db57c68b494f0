"""The history workflow example: its add/check/page step runs as written, and a regression fails the job."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from bench.records import load_history, write_points
from tests.test_history import synthetic_points

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "github-workflow-history.yml"
SAMPLE = ROOT / "results" / "sample"


def _steps() -> dict[str, dict]:
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["history"]
    return {step.get("name", step.get("uses")): step for step in job["steps"]}


def _project(tmp_path: Path, history_points: list) -> Path:
    """A checkout as the workflow sees it after `make bench`: speedbench in .speedbench/.venv, a bench folder in
    .speedbench/results, and the restored history."""
    bin_dir = tmp_path / ".speedbench" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "speedbench").symlink_to(Path(sys.executable).parent / "speedbench")
    shutil.copytree(SAMPLE, tmp_path / ".speedbench" / "results" / "20261203T120000Z", ignore=shutil.ignore_patterns(
        "plots", "report.md"))
    write_points(tmp_path / "history", history_points)
    return tmp_path


def _run(step: dict, cwd: Path, summary: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_SHA": "f00dfeed1234",
           "GITHUB_REF_NAME": "main"}
    return subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_workflow_restores_benchmarks_adds_checks_publishes_and_pushes_in_that_order() -> None:
    names = list(_steps())
    order = ["Restore the history", "Benchmark this commit", "Add the point, check the history, draw the page",
             "Keep the page", "Push the new point"]
    assert [names.index(name) for name in order] == sorted(names.index(name) for name in order)
    assert "speedbench-history" in _steps()["Push the new point"]["run"]


def test_the_step_adds_the_point_draws_the_page_and_passes_an_unchanged_history(tmp_path: Path) -> None:
    project = _project(tmp_path, [])
    done = _run(_steps()["Add the point, check the history, draw the page"], project, tmp_path / "summary.md")
    assert done.returncode == 0, done.stderr
    points = load_history(project / "history")
    assert [(point.commit, point.branch) for point in points] == [("f00dfeed1234", "main")]
    assert (project / "history.html").read_text().startswith("<!DOCTYPE html>")
    assert "History check: passed" in (tmp_path / "summary.md").read_text()


def test_the_step_fails_the_job_on_an_unrecovered_regression(tmp_path: Path) -> None:
    project = _project(tmp_path, synthetic_points(30, step_at=15, seed=31))
    done = _run(_steps()["Add the point, check the history, draw the page"], project, tmp_path / "summary.md")
    assert done.returncode == 1
    assert "History check: FAILED" in (tmp_path / "summary.md").read_text()
    assert (project / "history.html").exists()  # the page is written before the check decides
