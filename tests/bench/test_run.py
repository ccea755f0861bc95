"""End to end: the bench against ``infercast serve``'s app (tiny random-weight model) on 127.0.0.1."""

import asyncio
import socket
import threading
import time

import numpy as np
import pytest

from infercast.bench.run import BenchConfig, run_bench_async

pytestmark = pytest.mark.slow


def _serve_tiny():
    import uvicorn

    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.loader import load
    from infercast.engine.server import create_app

    loaded = load("tiny", seed=0)
    engine = Engine(loaded, EngineConfig(max_num_batched_tokens=64, block_size=4, kv_cache_bytes=8e6,
                                         max_model_len=256), time.monotonic, np.random.default_rng(0))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(engine, loaded.name), host="127.0.0.1", port=port,
                                           log_level="error", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}/v1", loaded.name, engine


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_bench_measures_infercast_serve(endpoint):
    server, thread, url, name, engine = _serve_tiny()
    try:
        cfg = BenchConfig(base_url=url, model=name, endpoint=endpoint, concurrency=2, num_requests=4,
                          input_tokens=12, output_tokens=6, warmup_requests=1)
        res = asyncio.run(run_bench_async(cfg))
    finally:
        server.should_exit = True
        thread.join(15)
    s = res.summary
    assert s.completed == 4 and s.failed == 0, s.failure_reasons
    assert s.token_count_source == "usage" and s.total_output_tokens == 4 * 6  # ignore_eos honoured
    # The tiny model steps in ~1 ms: several tokens can share a chunk, or all arrive at once
    # (TPOT 0 is then the right measurement, not an error).
    assert s.ttft.count == 4 and s.ttft.mean > 0 and s.tpot.mean >= 0
    assert s.e2e.mean >= s.ttft.mean
    # n - 1 ITL values per request at most (a random-weight model's tokens may decode to empty
    # text, merging into the next chunk)
    assert 0 < s.itl.count <= 4 * 5
