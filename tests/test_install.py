"""Installing DocAnchor: ``pip install -e .`` (the README's ./scripts/install.sh) runs setuptools'
build hooks on pyproject.toml; they must finish without warnings, which pip (26 and later)
prints as boxed ``BuildBackendWarning`` blocks a new user takes for a fault."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from tests.conftest import REPO
from tests.waiting import BACKSTOP_S

PACKAGES = ("docanchor", "plugin", "ingest", "retrieval", "summarize")

HOOKS = """
import json, sys, warnings
from setuptools import build_meta as backend
out = sys.argv[1]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    backend.get_requires_for_build_editable()
    backend.prepare_metadata_for_build_editable(out)
    backend.build_editable(out)
    backend.build_wheel(out)
print(json.dumps([f"{w.category.__name__}: {w.message}" for w in caught]))
"""


def test_installing_from_pyproject_prints_no_build_backend_warning(tmp_path):
    """Before: setuptools' editable install of the flat layout chose its import-hook strategy and
    warned ``InformationOnly: Editable installation. Please be careful with folders in your working
    directory ...``, shown by pip 26.3 as a ``BuildBackendWarning`` box on every install. The hooks
    pip calls (``get_requires_for_build_editable``, ``prepare_metadata_for_build_editable``,
    ``build_editable``, and ``build_wheel`` for ``pip install .``) run on a copy of the project."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "manifest.json"):
        shutil.copy(REPO / name, project / name)
    for package in PACKAGES:
        shutil.copytree(REPO / package, project / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    out.mkdir()
    run = subprocess.run([sys.executable, "-c", HOOKS, str(out)], cwd=project, capture_output=True, text=True,
                         timeout=BACKSTOP_S)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.splitlines()[-1]) == [], run.stdout[-2000:]
    wheels = {p.name for p in out.glob("*.whl")}
    assert len(wheels) == 2, wheels  # the editable wheel and the regular one
