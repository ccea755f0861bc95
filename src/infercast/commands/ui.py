"""``infercast ui``: the interactive what-if page, served locally."""

from __future__ import annotations

import typer

HELP = (
    "Open the what-if page (estimate, compare, simulate, plan, validation) on a local web server."
)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def free_port(host: str) -> int:
    """A port the OS says is free on ``host`` now."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_ui(host: str, port: int | None, open_browser: bool) -> None:
    import sys

    import uvicorn

    from infercast.errors import ConfigError
    from infercast.ui.app import create_app

    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"--port must be 1..65535, got {port}")
    if host not in LOOPBACK:
        print(
            f"infercast ui: warning: serving on {host}, reachable from other machines; the page "
            "has no login and runs simulations on request. Use the default 127.0.0.1 unless you "
            "mean it.",
            file=sys.stderr,
        )
    port = port or free_port(host)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    print(f"infercast ui: serving on {url} (Ctrl-C to stop)", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        uvicorn.run(create_app(), host=host, port=port, log_level="warning")
    except OSError as exc:
        raise ConfigError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


def register(app: typer.Typer) -> None:
    @app.command("ui", help=HELP)
    def ui_cmd(
        port: int | None = typer.Option(None, "--port", help="TCP port (default: a free one)"),
        host: str = typer.Option(
            "127.0.0.1",
            "--host",
            help="address to bind; anything but loopback is reachable "
            "from other machines and prints a warning",
        ),
        open_browser: bool = typer.Option(
            False, "--open", help="also open the page in the default browser"
        ),
    ) -> None:
        run_ui(host, port, open_browser)
