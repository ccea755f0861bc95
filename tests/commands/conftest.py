"""Shared by the command tests: ``cli``, the command line run in-process."""

from __future__ import annotations

import pytest

from infercast.cli import main


@pytest.fixture
def cli(capsys):
    """``cli(argv) -> (exit code, stdout, stderr)``: ``infercast`` run in this process."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        code = 0
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
