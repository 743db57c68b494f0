"""The package's shape: code outside it uses the public API only, and the import contract is the tool's."""

from __future__ import annotations

import ast
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


def _private_imports(source: str, packages: set[str]) -> list[str]:
    """Imports of a private module: `bench.<package>._x`, `_x` taken from `bench.<package>`, or a top-level
    `bench._x` (`bench._version` aside: `__version__` is read from it at import)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if len(parts) >= 3 and parts[0] == "bench" and parts[1] in packages and parts[2].startswith("_"):
                found.append(module)
            elif len(parts) >= 2 and parts[0] == "bench" and parts[1].startswith("_") and parts[1] != "_version":
                found.append(module)
    return found


def test_tests_use_the_public_api_of_every_package() -> None:
    packages = {path.parent.name for path in (ROOT / "bench").glob("*/__init__.py")}
    assert {"analysis", "commands", "pipeline", "records", "render", "runner", "server"} <= packages
    assert _private_imports("from bench.server._models import x\nfrom bench.render import (a,\n _plots)", packages) \
        == ["bench.server._models", "bench.server._models.x", "bench.render._plots"]
    assert _private_imports("from bench.render import plot_all\nimport bench.records", packages) == []
    assert _private_imports("from bench._errors import BenchError", packages) == [
        "bench._errors", "bench._errors.BenchError"]
    assert _private_imports("from bench import BenchError", packages) == []
    offenders = {path.name: _private_imports(path.read_text(encoding="utf-8"), packages)
                 for path in (ROOT / "tests").glob("*.py")}
    assert {name: found for name, found in offenders.items() if found} == {}



ANY_MAPPING = re.compile(r"\b(?:dict|Dict|Mapping|MutableMapping)\[str,\s*Any\]")
"""An annotation of a mapping whose values are `Any`: keys a reader must guess."""
MOST_ANY_MAPPINGS = 5


def test_what_passes_between_stages_is_typed_not_a_mapping_of_any() -> None:
    assert ANY_MAPPING.search("def f(x: Mapping[str, Any]) -> dict[str,Any]:")
    assert not ANY_MAPPING.search("def f(x: JsonMapping) -> dict[str, CellValue]:")
    found = [f"{path.relative_to(ROOT)}:{number}" for path in sorted((ROOT / "bench").rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ANY_MAPPING.search(line)]
    assert len(found) <= MOST_ANY_MAPPINGS, f"{len(found)} Any-valued mapping annotations: {found}"
