"""The analysis notebook executes against the committed sample run, so it never rots."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def test_analysis_notebook_executes() -> None:
    if not (ROOT / "results" / "sample" / "baseline.json").exists():
        pytest.fail("results/sample/ is missing: the committed sample run is part of the repository")
    notebook = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.get("output_type") == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert "Comparison: baseline=baseline.json speculative=speculative.json" in text
