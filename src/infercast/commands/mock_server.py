"""``infercast mock-server``: an OpenAI-compatible server whose timing is known exactly."""

from __future__ import annotations

import typer

from infercast.errors import ConfigError


def register(app: typer.Typer) -> None:
    """Add ``mock-server`` to the CLI."""

    @app.command("mock-server")
    def mock_server(
        host: str = typer.Option("127.0.0.1", "--host"),
        port: int = typer.Option(8000, "--port"),
        ttft_ms: float = typer.Option(50.0, "--ttft-ms", help="Receipt to first content chunk."),
        itl_ms: float = typer.Option(10.0, "--itl-ms", help="Time per output token."),
        tokens_per_chunk: int = typer.Option(1, "--tokens-per-chunk"),
        default_max_tokens: int = typer.Option(
            16, "--default-max-tokens", help="When a request omits max_tokens."
        ),
        stop_after: int = typer.Option(
            None, "--stop-after", help="Early stop after this many tokens."
        ),
        role_chunk: bool = typer.Option(
            True, "--role-chunk/--no-role-chunk", help="Empty role chunk first."
        ),
        usage: bool = typer.Option(
            True, "--usage/--no-usage", help="Honour stream_options.include_usage."
        ),
        reasoning_tokens: int = typer.Option(
            0, "--reasoning-tokens", help="Chat: first tokens as reasoning."
        ),
        close_after_stream: bool = typer.Option(
            False,
            "--close-after-stream",
            help="Close each connection after its response (keep-alive advertised).",
        ),
        http_error_every: int = typer.Option(
            0, "--http-error-every", help="Answer every N-th request with 500."
        ),
        midstream_close_every: int = typer.Option(
            0, "--midstream-close-every", help="Drop every N-th stream..."
        ),
        midstream_close_after: int = typer.Option(
            2, "--midstream-close-after", help="...after this many chunks."
        ),
        hang_every: int = typer.Option(0, "--hang-every", help="Never answer every N-th request."),
        model_name: str = typer.Option("mock", "--model-name"),
    ) -> None:
        """Serve /v1/completions and /v1/chat/completions with exact, configurable timing."""
        from pydantic import ValidationError

        from infercast.bench.mock import MockConfig
        from infercast.bench.mock_http import serve
        from infercast.validation import check_port

        check_port(port)
        try:
            cfg = MockConfig(
                ttft_s=ttft_ms / 1e3,
                itl_s=itl_ms / 1e3,
                tokens_per_chunk=tokens_per_chunk,
                default_max_tokens=default_max_tokens,
                stop_after_tokens=stop_after,
                role_chunk=role_chunk,
                usage=usage,
                reasoning_tokens=reasoning_tokens,
                close_after_stream=close_after_stream,
                http_error_every=http_error_every,
                midstream_close_every=midstream_close_every,
                midstream_close_after_chunks=midstream_close_after,
                hang_every=hang_every,
                model_name=model_name,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ConfigError(f"mock-server {err['loc'][0]}: {err['msg']}") from None
        typer.echo(
            f"infercast mock server on http://{host}:{port}/v1 "
            f"(TTFT {ttft_ms} ms, ITL {itl_ms} ms, {tokens_per_chunk} token(s)/chunk)",
            err=True,
        )
        try:
            serve(cfg, host, port)
        except OSError as exc:
            raise ConfigError(
                f"--host {host} --port {port}: {exc.strerror}; pick a free port"
            ) from None
