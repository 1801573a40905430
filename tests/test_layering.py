"""Imports point one way: plugin -> ingest, retrieval, summarize -> docanchor (core);
ingest may also use summarize (the anchor is built at ingest time); nothing imports plugin."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("docanchor", "ingest", "retrieval", "summarize", "plugin")
ALLOWED = {
    "docanchor": {"docanchor"},
    "ingest": {"ingest", "docanchor", "summarize"},
    "retrieval": {"retrieval", "docanchor"},
    "summarize": {"summarize", "docanchor"},
    "plugin": set(PACKAGES),
}


def imported_packages(path: Path, package: str) -> set[str]:
    """Top-level DocAnchor packages imported anywhere in ``path`` (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [package] if node.level else [node.module or ""]
        else:
            continue
        found.update(n.split(".")[0] for n in names if n.split(".")[0] in PACKAGES)
    return found


def modules():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            yield package, path


@pytest.mark.parametrize("package,path", list(modules()), ids=lambda v: str(v).replace(str(REPO) + "/", ""))
def test_imports_point_one_way(package, path):
    bad = imported_packages(path, package) - ALLOWED[package]
    assert not bad, f"{path.relative_to(REPO)} ({package}) imports {sorted(bad)}"


def test_the_checker_sees_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom plugin.api import DocAnchor\ndef f():\n    import retrieval.search\nfrom . import x\n")
    assert imported_packages(probe, "summarize") == {"plugin", "retrieval", "summarize"}


def test_every_package_has_modules():
    assert {p for p, _ in modules()} == set(PACKAGES)
