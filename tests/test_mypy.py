"""mypy passes on the typed core (``[tool.mypy]`` in pyproject.toml: specs, cost, sched, sim)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_passes_on_the_typed_core(monkeypatch):
    api = pytest.importorskip("mypy.api", reason="mypy is in the test extra; CI installs it")
    monkeypatch.chdir(ROOT)  # mypy reads [tool.mypy] (files, overrides) from ./pyproject.toml
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml")])
    assert status == 0, stdout + stderr


def test_the_package_ships_its_type_marker():
    assert (ROOT / "src" / "infercast" / "py.typed").is_file()
