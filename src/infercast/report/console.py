"""The Rich console every command prints its tables on."""

from __future__ import annotations

from rich.console import Console

#: Width of output that goes to a file or pipe (Rich would assume 80 columns and
#: elide the estimate table's cells); a terminal keeps its own width.
PIPE_WIDTH = 160


def make_console(stderr: bool = False) -> Console:
    """A console at the terminal's width, or :data:`PIPE_WIDTH` columns when not a terminal."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, width=PIPE_WIDTH)
