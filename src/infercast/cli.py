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

from infercast.errors import InfercastError, with_flags

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
    "infercast.commands.ui",
    "infercast.commands.fleet",
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
    def _root(
        ctx: typer.Context,
        version: bool = typer.Option(
            False, "--version", is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """With no command, analyze the seed case (Llama-3.1-70B FP8 on one H100)."""
        if version:
            from infercast import __version__

            print(f"infercast {__version__}")
            raise typer.Exit()
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


# Which extra installs a module the base install leaves out (pyproject.toml).
EXTRA_OF = {
    **dict.fromkeys(
        (
            "fastapi",
            "uvicorn",
            "gguf",
            "threadpoolctl",
            "safetensors",
            "prometheus_client",
            "jinja2",
        ),
        "serve",
    ),
    **dict.fromkeys(("aiohttp", "httptools", "uvloop", "tokenizers"), "bench"),
    "ray": "ray",
    "torch": "torch",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra to install for a module the base install lacks (None: a real bug)."""
    return EXTRA_OF.get((exc.name or "").split(".")[0])


def _usage_line(exc: Exception) -> str:
    """A click usage error as one line, pointing at the command's --help."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and isinstance(exc, _click_classes("UsageError")):
        message += f" (see: {ctx.command_path} --help)"
    return message


def command_flags(app: typer.Typer, argv: list[str]) -> dict[str, str]:
    """Parameter name -> flag for the command ``argv`` runs: its options' own names, then the
    ``PARAM_FLAGS`` its module declares for library parameters named otherwise."""
    name = next((a for a in argv if not a.startswith("-")), None)
    command = getattr(typer.main.get_command(app), "commands", {}).get(name) if name else None
    if command is None:
        return {}
    flags = {}
    for param in command.params:
        longs = [o for o in param.opts if o.startswith("--")]
        if param.name and longs:
            flags[param.name] = longs[0]
    for module in COMMAND_MODULES:
        if module.rpartition(".")[2].replace("_", "-") == name:
            flags.update(getattr(importlib.import_module(module), "PARAM_FLAGS", {}))
    return flags


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``infercast`` script."""
    app = build_app()
    try:
        app(args=argv, prog_name="infercast", standalone_mode=False)
    except InfercastError as exc:
        flags = command_flags(app, list(sys.argv[1:] if argv is None else argv))
        print(f"infercast: error: {with_flags(str(exc), flags)}", file=sys.stderr)
        sys.exit(2)
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        print(
            f"infercast: error: this command needs the {extra!r} extra (no module {exc.name!r}): "
            f"pip install 'infercast[{extra}]'",
            file=sys.stderr,
        )
        sys.exit(2)
    except Exception as exc:
        # Usage errors (unknown option, bad value) carry their own message and exit code 2;
        # typer >= 0.29 raises them from its vendored click, older typer from click itself.
        if isinstance(exc, _click_classes("ClickException")):
            print(f"infercast: error: {_usage_line(exc)}", file=sys.stderr)
            sys.exit(2 if isinstance(exc, _click_classes("UsageError")) else exc.exit_code)
        if isinstance(exc, _click_classes("Exit")):
            sys.exit(exc.exit_code)
        if isinstance(exc, _click_classes("Abort")):
            sys.exit(130)
        raise


if __name__ == "__main__":  # pragma: no cover
    main()
