"""Shared by the report tests: a recording ``console`` and ``render``, a table as plain text."""

from __future__ import annotations

import io

import pytest
from rich.console import Console


@pytest.fixture
def console():
    """A console that keeps what it prints (``console.export_text()``), 160 columns wide."""
    return Console(record=True, width=160, file=io.StringIO())


@pytest.fixture
def render(console):
    """``render(table) -> str``: the table as plain text."""

    def run(renderable) -> str:
        console.print(renderable)
        return console.export_text()

    return run
