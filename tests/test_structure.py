"""`make structure`: docs/structure.md's figures are what `benchmarks/structure.py` computes from the code, and the
computation finds layers, cycles, long functions and walks (with a call back up) on a package of known shape."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("structure_under_test", ROOT / "benchmarks" / "structure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["structure_under_test"] = module
    spec.loader.exec_module(module)
    return module


LONG_BODY = "".join(f"    x{index} = {index}\n" for index in range(60))

PACKAGE = {
    "__init__.py": "",
    "pkg/__init__.py": "",
    "pkg/_low.py": (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from bench.pkg._top import Job\n"
        "def low(job: Job) -> int:\n"
        "    return job.size()\n"  # a method of a class above: a call back up the layers
    ),
    "pkg/_mid.py": "from bench.pkg._low import low\ndef mid(job):\n    return low(job) + 1\n",
    "pkg/_top.py": (
        "from dataclasses import dataclass\n"
        "from bench.pkg._mid import mid\n"
        "@dataclass\n"
        "class Job:\n"
        "    n: int\n"
        "    def size(self) -> int:\n"
        "        return self.n\n"
        "def unrelated(value):\n"
        "    return value\n"
        "def top(job: Job, other: int) -> int:\n"
        "    unrelated(other)\n"
        "    for part in [job]:\n"
        "        mid(part)\n"
        "    return mid(job)\n"
    ),
    "cyc/__init__.py": "",
    "cyc/_a.py": "from bench.cyc import _b\ndef a():\n    return _b.b()\n",
    "cyc/_b.py": "def b():\n    from bench.cyc._a import a\n    return a\n",
    "cyc/_c.py": f"from bench.cyc._a import a\ndef long():\n{LONG_BODY}    return a()\n",
}


@pytest.fixture
def package(tmp_path: Path) -> Path:
    for path, text in PACKAGE.items():
        (tmp_path / "bench" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "bench" / path).write_text(text, encoding="utf-8")
    return tmp_path


def test_docs_structure_holds_the_figures_the_command_computes(structure: ModuleType) -> None:
    document = (ROOT / "docs" / "structure.md").read_text(encoding="utf-8")
    assert structure.documented(document) == structure.compute(), "run `make structure`"


def test_layers_put_each_module_above_what_it_imports_and_a_cycle_on_one(structure: ModuleType,
                                                                         package: Path) -> None:
    modules = structure.load(structure.read_sources(None, package))
    found = {item.name: item for item in structure.packages(modules)}
    assert (found["pkg"].modules, found["pkg"].layers, found["pkg"].cycles) == (3, 3, [])  # TYPE_CHECKING: no edge
    assert (found["cyc"].modules, found["cyc"].layers, found["cyc"].cycles) == (3, 2, [["_a", "_b"]])
    assert found["cyc"].long_functions == ["cyc/_c.py:long (62)"]
    assert found["pkg"].long_functions == []


def test_a_walk_follows_the_parameter_and_counts_a_call_back_up(structure: ModuleType, package: Path) -> None:
    modules = structure.load(structure.read_sources(None, package))
    walk = structure.walk(modules, "pkg/_top.py:top:job")
    # top -> mid (the loop's item and the parameter itself: one visit) -> low -> Job.size, back up in _top
    assert walk.steps == ("_top", "_mid", "_low", "_top")
    assert (walk.modules, walk.back_up, walk.returns) == (3, 1, 1)
    assert structure.passing_calls(modules, "bench.pkg._top", "top", "other") == [("bench.pkg._top", "unrelated",
                                                                                      "value")]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_commit_is_read_from_git_not_from_the_tree(structure: ModuleType, package: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=package, check=True)
    subprocess.run(["git", "add", "bench"], cwd=package, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "package"], cwd=package, check=True)
    (package / "bench" / "pkg" / "_mid.py").write_text("def mid(job):\n    return 1\n", encoding="utf-8")
    now = structure.walk(structure.load(structure.read_sources(None, package)), "pkg/_top.py:top:job")
    then = structure.walk(structure.load(structure.read_sources("HEAD", package)), "pkg/_top.py:top:job")
    assert (now.steps, then.steps) == (("_top", "_mid"), ("_top", "_mid", "_low", "_top"))


def test_the_block_is_replaced_between_its_markers(structure: ModuleType) -> None:
    document = "head\n<!-- structure: begin -->\nold\n<!-- structure: end -->\ntail\n"
    assert structure.replaced(document, "new\n", None) == (
        "head\n<!-- structure: begin -->\nnew\n<!-- structure: end -->\ntail\n")
    assert structure.documented(structure.replaced(document, "new\n", None)) == "new\n"


@pytest.mark.parametrize("arguments, message", [
    (["--at", "no-such-revision"], "git cannot read bench/ at 'no-such-revision'"),
    (["--walk", "runner"], "--walk 'runner' is not PATH:FUNCTION:PARAMETER"),
    (["--walk", "runner/nothing.py:f:x"], "no function f in bench/runner/nothing.py"),
])
def test_bad_input_is_one_line_and_exit_2(structure: ModuleType, capsys: pytest.CaptureFixture[str],
                                          arguments: list[str], message: str) -> None:
    assert structure.main(arguments) == 2
    err = capsys.readouterr().err
    assert err == f"structure: {message}\n"
