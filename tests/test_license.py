"""The LICENSE file, pyproject.toml, the served /openapi.json and the plugin manifest name one license."""

from __future__ import annotations

import tomllib
from pathlib import Path

from plugin.openapi import LICENSE

REPO = Path(__file__).resolve().parents[1]


def test_license_file_matches_pyproject_and_openapi():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"]
    assert declared == "MIT" and text.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in text and "Copyright (c)" in text
    assert LICENSE["identifier"] == declared


def test_license_file_is_packaged():
    """setuptools picks up LICENSE* as license files by default; pyproject must not switch that off."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project.get("license-files") in (None, ["LICENSE"]), project.get("license-files")
