"""ruff passes on the code: formatted, lint-clean, lines at most 100 columns ([tool.ruff] in
pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("src", "tests", "benchmarks", "examples")
LINE_LENGTH = 100


def _ruff(*args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is in the test extra; CI installs it")
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *TREES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_ruff_check_passes():
    run = _ruff("check", "--no-cache", "--output-format", "concise")
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_format_leaves_the_code_unchanged():
    run = _ruff("format", "--check", "--no-cache")
    assert run.returncode == 0, f"run ruff format {' '.join(TREES)}:\n" + run.stdout + run.stderr


def test_lines_are_at_most_100_columns_and_checked():
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["line-length"] == LINE_LENGTH
    lint = ruff["lint"]
    assert "E" in lint["select"] or "E501" in lint["select"]
    assert not {"E501", "E5", "E"} & set(lint.get("ignore", ())), "E501 (line too long) is off"
