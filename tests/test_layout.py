"""The package's shape: code outside it uses the public API only, and the import contract is the tool's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRIVATE_IMPORT = re.compile(r"^\s*(?:from|import)\s+bench(?:\.\w+)*\._(?!version\b)\w+", re.M)


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def test_notebook_and_benchmarks_use_the_public_api_only() -> None:
    sources = {path: path.read_text(encoding="utf-8") for path in (ROOT / "benchmarks").rglob("*.py")}
    sources.update({path: _notebook_code(path) for path in (ROOT / "notebooks").glob("*.ipynb")})
    assert sources
    offenders = {str(path.relative_to(ROOT)): PRIVATE_IMPORT.findall(text) for path, text in sources.items()}
    assert {path: found for path, found in offenders.items() if found} == {}


def test_the_private_import_pattern_catches_what_it_should() -> None:
    assert PRIVATE_IMPORT.search("from bench.analysis._stats import x")
    assert PRIVATE_IMPORT.search("import bench._records as records")
    assert not PRIVATE_IMPORT.search("from bench.analysis import compare")


def test_import_contract_is_kept() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(linter)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout
