"""The light base install: estimate, simulate, plan and validate run without the serve/bench/ray
extras (their modules blocked here as if not installed), and a command that needs an extra says
which one in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from infercast.cli import EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = sorted(EXTRA_OF) + ["httpx", "openai"]
RUNNER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
from infercast.cli import main
main(sys.argv[1:])
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, timeout=600
    )


def test_base_dependencies_leave_the_extras_out():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {
        d.split(">")[0].split("=")[0].split(";")[0].strip().lower() for d in project["dependencies"]
    }
    assert not base & {m.lower() for m in EXTRA_OF}
    extras = project["optional-dependencies"]
    assert {"serve", "bench", "ray", "all", "test"} <= extras.keys()
    # The README's test command installs every extra but torch (a multi-GB CUDA build on PyPI's
    # Linux index): .ci/run adds it, and test_ci_runs_the_torch_tests makes it stick
    own = [d for d in extras["test"] if d.startswith("infercast[")]
    assert len(own) == 1 and set(own[0][len("infercast[") : -1].split(",")) == {"all"}


def test_ci_runs_the_torch_tests():
    """In CI (INFERCAST_REQUIRE_TORCH=1, set by .ci/run) the torch extra is installed, so the
    compact-weight kernels' tests and the measured claim 12 run instead of skipping."""
    if os.environ.get("INFERCAST_REQUIRE_TORCH") != "1":
        pytest.skip("only in CI: INFERCAST_REQUIRE_TORCH=1 (set by .ci/run)")
    import numba  # noqa: F401
    import torch  # noqa: F401


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "-m", "llama-3.1-8b", "--json"],
        ["simulate", "--request-rate", "2", "--num-prompts", "20", "--no-progress", "--json"],
        [
            "plan",
            "-m",
            "llama-3.1-8b",
            "--request-rate",
            "2",
            "--slo-ttft-ms",
            "2000",
            "--slo-tpot-ms",
            "50",
            "--input-tokens",
            "256",
            "--output-tokens",
            "64",
            "--tp",
            "1",
            "--precision",
            "bf16/bf16",
            "--batch-caps",
            "64",
            "--chunks",
            "2048",
            "--no-speculative",
            "--disagg-ratios",
            "none",
            "--num-prompts",
            "20",
            "--executor",
            "serial",
            "--json",
        ],
        ["validate", "--help"],
        ["hardware", "--json"],
    ],
)
def test_base_commands_run_without_the_extras(args):
    proc = _run(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize(
    "args, extra",
    [(["serve"], "serve"), (["bench", "--model", "m", "--max-concurrency", "1"], "bench")],
)
def test_a_missing_extra_is_one_line_naming_it(args, extra):
    proc = _run(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith(f"pip install 'infercast[{extra}]'")
