"""What produced a JSON result: the command line, its parsed inputs, infercast's version, the date.

Every command's JSON result carries this under ``"meta"`` so a file found later says
how to reproduce it. The clock is read here, at the CLI's edge, never below it.
"""

from __future__ import annotations

import importlib
import shlex
import sys
from datetime import UTC, datetime
from typing import Any

from infercast import __version__


def _current_params() -> dict[str, Any]:
    """The invoked command's parsed options (typer's vendored click, or click itself)."""
    for module in ("typer._click.globals", "click.globals", "click"):
        try:
            get = getattr(importlib.import_module(module), "get_current_context", None)
        except ImportError:
            continue
        ctx = get(silent=True) if get else None
        if ctx is not None:
            return {k: v for k, v in ctx.params.items() if k != "api_key"}  # never echo a secret
    return {}


def run_meta(now: datetime | None = None, argv: list[str] | None = None) -> dict[str, Any]:
    """``{"command", "inputs", "infercast_version", "date"}`` for the running command."""
    args = sys.argv[1:] if argv is None else argv
    when = now or datetime.now(UTC)
    return {
        "command": "infercast " + shlex.join(args),
        "inputs": _current_params(),
        "infercast_version": __version__,
        "date": when.isoformat(timespec="seconds"),
    }


def with_meta(data: Any) -> Any:
    """``data`` with a ``"meta"`` entry when it is a JSON object (listings stay lists)."""
    if isinstance(data, dict) and "meta" not in data:
        return {"meta": run_meta(), **data}
    return data
