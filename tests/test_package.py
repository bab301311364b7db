"""The package's own facts: the version comes from pyproject.toml through the package metadata, the licence file
the metadata names exists, and the README and the changelog name the version being built. The wheel itself is
built, installed and run outside the checkout by scripts/test_wheel.sh."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grposcope.cli import app

ROOT = Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_version_option_prints_the_package_metadata_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"grposcope {importlib.metadata.version('grposcope')}\n"


def test_installed_metadata_is_pyprojects_version():
    assert importlib.metadata.version("grposcope") == PROJECT["version"], (
        "the installed grposcope's metadata is older than pyproject.toml: rerun bash scripts/setup.sh")


def test_uninstalled_source_tree_reads_pyprojects_version(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    from grposcope.version import package_version

    assert package_version() == PROJECT["version"]


def test_license_files_exist_and_hold_the_apache_text():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text


def test_readme_and_changelog_name_the_version_being_built():
    version = PROJECT["version"]
    install = (ROOT / "README.md").read_text().split("## Install\n", 1)[1].split("\n## ", 1)[0]
    assert f"grposcope-{version}-py3-none-any.whl" in install, "README's install section names another wheel"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(r"^## \[Unreleased\]$", changelog, re.M)
    assert re.search(r"^## \[0\.1\.0\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert re.search(rf"\b{re.escape(version)}\b", changelog), f"CHANGELOG.md does not say what {version} is"
