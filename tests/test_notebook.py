"""The analysis notebook executes and draws inline on any results folder; what it cannot read is one line.

Executed with a real Jupyter kernel (nbclient): on the committed sample, on a fresh `make bench`-shaped folder of two
workloads, on the README's file names (`baseline.json`, `spec.json`), on two run files named in its first cell,
and on a folder with nothing to compare."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"
SAMPLE = ROOT / "results" / "sample"
FIGURES_PER_COMPARISON = 3  # speedup, accept rate vs speedup, latency


def _execute(monkeypatch: pytest.MonkeyPatch, **env: str) -> tuple[list[dict], bool]:
    """Run the notebook with `SPEEDBENCH_<NAME>` variables set; return its outputs and whether a cell failed."""
    for name in ("RESULTS", "BASELINE", "SPECULATIVE"):
        monkeypatch.delenv(f"SPEEDBENCH_{name}", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(f"SPEEDBENCH_{name.upper()}", value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    failed = False
    try:
        client.execute()
    except CellExecutionError:
        failed = True
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    return outputs, failed


def _images(outputs: list[dict]) -> int:
    return sum(1 for output in outputs if "image/png" in output.get("data", {}))


def _text(outputs: list[dict]) -> str:
    return "".join(output.get("text", "") for output in outputs)


def test_the_notebook_draws_the_committed_sample(monkeypatch) -> None:
    outputs, failed = _execute(monkeypatch)
    assert not failed and not [output for output in outputs if output.get("output_type") == "error"]
    assert "Comparison: baseline=baseline.json speculative=speculative.json" in _text(outputs)
    assert _images(outputs) == FIGURES_PER_COMPARISON  # drawn inline, not only built


def test_the_notebook_draws_every_workload_of_a_fresh_make_bench_folder(bench_folder: Path, monkeypatch) -> None:
    outputs, failed = _execute(monkeypatch, results=str(bench_folder))
    assert not failed
    text = _text(outputs)
    assert "qualitative: baseline.json (55 samples) vs speculative.json (55 samples)" in text
    assert "throughput_1k: baseline.json" in text
    assert _images(outputs) == 2 * FIGURES_PER_COMPARISON


def test_the_notebook_reads_the_readme_names_and_two_named_files(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "own"
    folder.mkdir()
    shutil.copy(SAMPLE / "baseline.json", folder / "baseline.json")
    shutil.copy(SAMPLE / "speculative.json", folder / "spec.json")  # the README's flow names it spec.json
    outputs, failed = _execute(monkeypatch, results=str(folder))
    assert not failed and "Comparison: baseline=baseline.json speculative=spec.json" in _text(outputs)
    assert _images(outputs) == FIGURES_PER_COMPARISON
    outputs, failed = _execute(monkeypatch, baseline=str(folder / "baseline.json"),
                               speculative=str(folder / "spec.json"), results=str(tmp_path / "ignored"))
    assert not failed and "given files: baseline.json (22 samples) vs spec.json (22 samples)" in _text(outputs)


def test_what_the_notebook_cannot_read_is_one_line(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "notes.txt").write_text("not a run")
    outputs, failed = _execute(monkeypatch, results=str(tmp_path))
    (error,) = [output for output in outputs if output.get("output_type") == "error"]
    assert failed and error["ename"] == "BenchError"
    assert error["traceback"] == [f"speedbench: error: {tmp_path}: not a comparison (no run files): expected "
                                  "baseline.json with speculative.json or one other run file, a make bench folder "
                                  "of workloads, or a sweep; or name the two run files"]
    assert _images(outputs) == 0
