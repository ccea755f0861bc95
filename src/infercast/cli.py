"""The ``infercast`` command line: one Typer app, one module per command.

Each module in :mod:`infercast.commands` has ``register(app)``; it keeps heavy
imports inside the command body so ``infercast --help`` stays fast. Errors a
user caused (:class:`~infercast.errors.InfercastError`) print one line on stderr
and exit with code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from infercast.errors import InfercastError

# One line per command module; a face adds its own line here.
COMMAND_MODULES = (
    "infercast.commands.estimate",
    "infercast.commands.hardware",
    "infercast.commands.models",
    "infercast.commands.serve",
    "infercast.commands.machine",
    "infercast.commands.bench",
    "infercast.commands.simulate",
    "infercast.commands.plan",
    "infercast.commands.mock_server",
    "infercast.commands.validate",
    "infercast.commands.calibrate",
    "infercast.commands.engines",
)


def build_app() -> typer.Typer:
    """The Typer app with every command registered."""
    app = typer.Typer(
        name="infercast",
        help="How fast and how expensive LLM inference will be, and why.",
        add_completion=False,
        pretty_exceptions_enable=False,
        no_args_is_help=False,
        invoke_without_command=True,
    )

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        """With no command, analyze the seed case (Llama-3.1-70B FP8 on one H100)."""
        if ctx.invoked_subcommand is None:
            from infercast.commands.estimate import run_default

            run_default()

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def _click_classes(name: str) -> tuple[type, ...]:
    """``name`` from every click the installed typer may raise: its vendored copy and click."""
    found = []
    for module in ("typer._click.exceptions", "click.exceptions", "typer.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return tuple(found)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``infercast`` script."""
    app = build_app()
    try:
        app(args=argv, prog_name="infercast", standalone_mode=False)
    except InfercastError as exc:
        print(f"infercast: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        # Usage errors (unknown option, bad value) carry their own message and exit code 2;
        # typer >= 0.29 raises them from its vendored click, older typer from click itself.
        if isinstance(exc, _click_classes("ClickException")):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, _click_classes("Exit")):
            sys.exit(exc.exit_code)
        if isinstance(exc, _click_classes("Abort")):
            sys.exit(130)
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
