"""``infercast serve``: the CPU engine behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        model: str = typer.Option(
            "tiny",
            help="tiny | 100m | 1b (random weights), "
            "smollm2-135m, a .gguf file or a Hugging Face directory",
        ),
        port: int = typer.Option(8000, help="TCP port"),
        host: str = typer.Option("127.0.0.1", help="Address to bind (0.0.0.0 exposes it)"),
        max_num_seqs: int = typer.Option(16, help="Most requests in one step"),
        max_num_batched_tokens: int = typer.Option(512, help="Token budget of one step"),
        scheduler: str = typer.Option("chunked", help="static | continuous | chunked"),
        max_model_len: int = typer.Option(2048, help="Context length (prompt + output)"),
        kv_cache_gib: float = typer.Option(1.0, help="KV cache memory, GiB (2**30 bytes)"),
        threads: int = typer.Option(1, help="BLAS threads (1 is often fastest on shared cores)"),
        max_waiting: int = typer.Option(64, help="Waiting-queue bound; beyond it answer 429"),
        api_key: str | None = typer.Option(
            None, envvar="INFERCAST_API_KEY", help="Require 'Authorization: Bearer KEY'"
        ),
        seed: int = typer.Option(0, help="Seed of random weights and of unseeded sampling"),
        enable_prefix_caching: bool = typer.Option(False, help="Reuse KV of shared prefixes"),
        backend: str = typer.Option(
            "numpy", help="numpy (float32) | torch (bf16 weights; pip install 'infercast[torch]')"
        ),
        max_body_bytes: int = typer.Option(
            4 * 2**20, help="Largest request body; beyond it answer 413"
        ),
        max_prompt_chars: int = typer.Option(
            2**20, help="Longest prompt text (all chat messages together); beyond it answer 400"
        ),
        header_timeout: float = typer.Option(
            10.0,
            help="Seconds a client has to send its request headers before the connection closes",
        ),
        body_timeout: float = typer.Option(
            30.0, help="Seconds a client has to send its request body before a 408"
        ),
        weights: str = typer.Option(
            "auto",
            help="auto (as stored: Q4_0/Q4_1 -> q4, Q8_0 -> "
            "int8) | fp32 | bf16 | int8 | q4 (all but fp32 need "
            "the torch extra)",
        ),
    ) -> None:
        """Serve a model on this CPU until interrupted (Ctrl-C drains, then cancels)."""
        import time

        import numpy as np

        from infercast.engine.engine import Engine, EngineConfig
        from infercast.engine.http_limits import ServerLimits, bind_socket
        from infercast.engine.loader import load
        from infercast.engine.server import create_app
        from infercast.errors import ConfigError
        from infercast.validation import check_int, check_seed

        if not 0 < port < 65536:
            raise ConfigError(f"--port {port} is not a TCP port; use 1-65535")
        check_seed(seed, "--seed")
        limits = ServerLimits(
            max_body_bytes=max_body_bytes,
            max_prompt_chars=max_prompt_chars,
            header_timeout_s=header_timeout,
            body_timeout_s=body_timeout,
        )
        cfg = EngineConfig(
            policy=scheduler,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            kv_cache_bytes=kv_cache_gib * 2**30,
            num_threads=threads,
            enable_prefix_caching=enable_prefix_caching,
            backend=backend,
        )
        check_int(max_waiting, "--max-waiting", 1, fix="give at least 1 request")
        from infercast.commands._progress import working

        with working(f"loading {model}"):
            loaded = load(model, seed=seed, weights=weights)
        sock = bind_socket(host, port)  # every flag and the model checked first
        engine = Engine(loaded, cfg, time.monotonic, np.random.default_rng(seed))
        app = create_app(
            engine, loaded.name, api_key=api_key, max_waiting=max_waiting, limits=limits
        )
        run_server(
            app,
            host,
            port,
            f"{loaded.name}: {loaded.cfg.num_params / 1e6:.0f}M params, "
            f"{loaded.weights_format} weights ({loaded.weights.nbytes / 1e6:.0f} MB)",
            limits,
            sock,
        )


def run_server(app, host: str, port: int, banner: str, limits=None, sock=None) -> None:
    """Run uvicorn (on ``sock`` if given); print the URL once the socket is listening."""
    import uvicorn

    from infercast.engine.http_limits import ServerLimits, uvicorn_config

    class _Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:
                print(f"infercast serve: {banner} at http://{host}:{port}/v1", flush=True)

    config = uvicorn_config(
        app, host, port, limits or ServerLimits(), log_level="warning", timeout_graceful_shutdown=5
    )
    _Server(config).run(sockets=[sock] if sock is not None else None)
