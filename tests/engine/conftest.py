"""A real server on 127.0.0.1 (a free port), started and stopped by the tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(
    model: str = "tiny", api_key: str | None = None, max_waiting: int = 64, limits=None, **engine_kw
) -> Iterator[tuple[str, object]]:
    """Start uvicorn in a thread; yields (base_url, engine); stops it afterwards."""
    import uvicorn

    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.http_limits import ServerLimits, uvicorn_config
    from infercast.engine.loader import load
    from infercast.engine.server import create_app

    loaded = load(model, seed=0)
    cfg = EngineConfig(
        **{
            "max_num_batched_tokens": 64,
            "block_size": 4,
            "kv_cache_bytes": 8e6,
            "max_model_len": 256,
            **engine_kw,
        }
    )
    engine = Engine(loaded, cfg, time.monotonic, np.random.default_rng(0))
    limits = limits or ServerLimits()
    app = create_app(engine, loaded.name, api_key=api_key, max_waiting=max_waiting, limits=limits)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn_config(
            app, "127.0.0.1", port, limits, log_level="error", timeout_graceful_shutdown=2
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", engine
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.fixture(scope="module")
def start_server():
    """The :func:`running_server` context manager, for tests that need their own server."""
    return running_server


def slow_down(engine, seconds: float = 0.003) -> None:
    """Make each engine step take a little longer: the tiny model finishes before a client acts."""
    fast_step = engine.step

    def slow_step():
        time.sleep(seconds)
        return fast_step()

    engine.step = slow_step


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout_s`` passes; its last answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture(scope="module")
def server_helpers():
    """(slow_down, wait_until) for test modules (conftest functions are not importable)."""
    return slow_down, wait_until
