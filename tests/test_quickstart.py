"""The README's Quickstart is what CI runs: its test command appears verbatim in .ci/run."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quickstart_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def test_quickstart_has_two_commands_and_ci_runs_the_test_one_verbatim():
    lines = _quickstart_lines()
    assert len(lines) == 2, lines
    install_and_run, test = lines
    assert install_and_run.startswith("pip install") and test.startswith("pip install")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci, f"{test!r} is not a line of .ci/run"
    assert any("python3 -m venv" in line for line in ci), (
        ".ci/run must use a brand-new virtual environment"
    )
