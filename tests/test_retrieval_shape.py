"""The retrieval package's shape (issue 15): search.py orchestrates stages in short functions,
and every number a stage or the packer tunes sits in its own module with its source."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO

MAX_FUNCTION_LINES = 60
MODULES = sorted((REPO / "retrieval" / "stages").glob("*.py")) + [REPO / "retrieval" / "search.py",
                                                                  REPO / "retrieval" / "pack.py"]


def _functions(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_function_is_over_60_lines(path):
    long = {f.name: f.end_lineno - f.lineno + 1 for f in _functions(path)
            if f.end_lineno - f.lineno + 1 > MAX_FUNCTION_LINES}
    assert not long, long


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_tuned_number_has_a_docstring_naming_its_source(path):
    body = ast.parse(path.read_text(encoding="utf-8")).body
    missing = []
    for node, after in zip(body, body[1:] + [None]):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        value = node.value
        if name.startswith("_") or not name.isupper() or not isinstance(value, ast.Constant):
            continue
        if isinstance(value.value, bool) or not isinstance(value.value, (int, float)):
            continue
        doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
        if "Source" not in str(doc):
            missing.append(name)
    assert not missing, f"{path.name}: constants without a 'Source:' in their docstring: {missing}"


def test_search_keeps_no_tuned_numbers_of_its_own():
    """The stages and the packer own their numbers; search.py only wires them together."""
    body = ast.parse((REPO / "retrieval" / "search.py").read_text(encoding="utf-8")).body
    numbers = [n.targets[0].id for n in body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
               and isinstance(n.value.value, (int, float)) and not isinstance(n.value.value, bool)]
    assert numbers == []
