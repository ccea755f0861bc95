"""A spinner with elapsed time on stderr while a long step runs, on a terminal only.

Commands whose work has no natural count (validate's predictions, calibrate's fit,
plan's search, machine's probes, serve's model load) wrap it in :func:`working`, so a
user sees that something runs and for how long; piped or redirected output stays clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console


@contextmanager
def working(label: str, console: Console | None = None) -> Iterator[None]:
    """Show ``label``, a spinner and the elapsed time on stderr until the block ends."""
    from infercast.report.console import make_console

    console = console or make_console(stderr=True)
    if not console.is_terminal:
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        progress.add_task(label, total=None)
        yield
