"""Progress for long steps: a spinner with elapsed time on a terminal, nothing when piped."""

from __future__ import annotations

import io
import time

from rich.console import Console

from infercast.commands._progress import working


def test_working_shows_its_label_on_a_terminal():
    out = io.StringIO()
    with working("predicting 3,660 measurements", Console(file=out, force_terminal=True, width=80)):
        time.sleep(0.3)  # the live display refreshes 10 times a second
    assert "predicting 3,660 measurements" in out.getvalue()


def test_working_is_silent_when_piped():
    out = io.StringIO()
    with working("fitting", Console(file=out, force_terminal=False, width=80)):
        pass
    assert out.getvalue() == ""
