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


def _documented_modules() -> set[str]:
    """The paths the tree in docs/structure.md lists (folders end with /), rebuilt from its indentation."""
    text = (ROOT / "docs" / "structure.md").read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1]
    stack: list[str] = []
    paths = set()
    for line in block.splitlines():
        name = line.strip().split()[0]
        depth = (len(line) - len(line.lstrip())) // 2
        stack[depth:] = [name.rstrip("/")]
        paths.add("/".join(stack) + ("/" if name.endswith("/") else ""))
    return paths


def test_docs_structure_lists_every_module_and_nothing_else() -> None:
    actual = {str(path.relative_to(ROOT)) for path in (ROOT / "bench").rglob("*.py") if path.name != "__init__.py"}
    actual |= {str(path.relative_to(ROOT)) + "/" for path in (ROOT / "bench").rglob("*")
               if path.is_dir() and (path / "__init__.py").exists()}
    actual.add("bench/")
    documented = _documented_modules()
    assert actual - documented == set(), "add these to docs/structure.md"
    assert documented - actual == set(), "these are listed in docs/structure.md but do not exist"


def test_no_module_in_the_package_is_over_450_lines_and_the_cli_under_350() -> None:
    sizes = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
             for path in (ROOT / "bench").rglob("*.py")}
    assert {path: size for path, size in sizes.items() if size > 450} == {}
    assert sizes["bench/cli.py"] < 350


def test_tests_use_the_public_api_of_the_runner_records_pipeline_and_commands() -> None:
    owned = re.compile(r"^\s*(?:from|import)\s+bench\.(?:runner|records|pipeline|commands)\._\w+", re.M)
    offenders = {path.name: owned.findall(path.read_text(encoding="utf-8")) for path in (ROOT / "tests").glob("*.py")}
    assert {name: found for name, found in offenders.items() if found} == {}
