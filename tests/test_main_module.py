"""``python -m infercast`` runs the same entry point as the ``infercast`` script."""

import subprocess
import sys


def test_python_m_infercast_runs_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "infercast", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("infercast ")


def test_python_m_infercast_bad_input_is_one_line_and_exit_2():
    out = subprocess.run(
        [sys.executable, "-m", "infercast", "estimate", "--model", "no-such-model"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "no-such-model" in out.stderr
