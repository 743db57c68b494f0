"""The typed faces of the lazy packages: what a type checker reads is what the lazy import returns."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import bench

LAZY_PACKAGES = {
    "bench": "_EXPORTS",
    "bench.analysis": "_HOME",
    "bench.pipeline": "_HOME",
    "bench.render": "_LAZY",
}
"""Each package that imports names on first use, and the map from name to module it reads."""


def typed_face(source: str) -> dict[str, str]:
    """The names a package's `if TYPE_CHECKING:` block imports, each with its module."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.dump(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
                    found[alias.name] = statement.module or ""
    return found


def package_source(package: str) -> str:
    """The text of a package's `__init__.py`."""
    return Path(importlib.import_module(package).__file__ or "").read_text()


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_type_checked_names_match_the_lazy_map(package: str) -> None:
    lazy: dict[str, str] = getattr(importlib.import_module(package), LAZY_PACKAGES[package])
    assert typed_face(package_source(package)) == lazy


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_every_lazy_name_is_the_object_its_module_defines(package: str) -> None:
    module = importlib.import_module(package)
    for name, home in typed_face(package_source(package)).items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_a_name_missing_from_the_typed_face_is_found() -> None:
    source = package_source("bench")
    edited = source.replace("        redact_url as redact_url,\n", "", 1)
    assert edited != source
    assert typed_face(edited) != bench._EXPORTS
    assert set(bench._EXPORTS) - set(typed_face(edited)) == {"redact_url"}
