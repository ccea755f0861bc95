"""End to end: the bench against ``infercast serve``'s app (tiny random-weight model) on
127.0.0.1."""

import asyncio
import socket
import threading
import time

import numpy as np
import pytest

from infercast.bench.run import BenchConfig, run_bench_async

pytestmark = pytest.mark.slow


def _serve_tiny(**engine_kw):
    import uvicorn

    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.loader import load
    from infercast.engine.server import create_app

    loaded = load("tiny", seed=0)
    engine = Engine(
        loaded,
        EngineConfig(
            max_num_batched_tokens=64,
            block_size=4,
            kv_cache_bytes=8e6,
            max_model_len=256,
            **engine_kw,
        ),
        time.monotonic,
        np.random.default_rng(0),
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(engine, loaded.name),
            host="127.0.0.1",
            port=port,
            log_level="error",
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}/v1", loaded.name, engine


def _bench_tiny(engine_kw: dict, **bench_kw):
    """One bench run against a tiny ``serve`` started for it (``engine_kw``: EngineConfig
    fields)."""
    server, thread, url, name, _ = _serve_tiny(**engine_kw)
    try:
        return asyncio.run(run_bench_async(BenchConfig(base_url=url, model=name, **bench_kw)))
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_bench_measures_infercast_serve(endpoint):
    server, thread, url, name, engine = _serve_tiny()
    try:
        cfg = BenchConfig(
            base_url=url,
            model=name,
            endpoint=endpoint,
            concurrency=2,
            num_requests=4,
            input_tokens=12,
            output_tokens=6,
            warmup_requests=1,
        )
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


def test_multi_turn_sessions_carry_the_history_and_hit_the_prefix_cache():
    res = _bench_tiny(
        {"enable_prefix_caching": True},
        endpoint="chat",
        concurrency=2,
        num_requests=2,
        turns=3,
        think_time_s=0.05,
        input_tokens=3,
        output_tokens=4,
        input_tokens_given=True,
        output_tokens_given=True,
        warmup_requests=0,
    )
    s = res.summary
    assert s.completed == 6 and s.failed == 0, s.failure_reasons
    assert s.cache_known == 6  # infercast serve reports usage.prompt_tokens_details.cached_tokens
    by_session: dict[str, list] = {}
    for rec in sorted(res.records, key=lambda r: r.arrival_s):
        by_session.setdefault(rec.request_id.split("-")[0], []).append(rec)
    for turns in by_session.values():
        prompts = [r.prompt_tokens for r in turns]
        assert prompts == sorted(prompts) and len(set(prompts)) == 3  # each prompt holds the last
        assert all(r.cached_prompt_tokens > 0 for r in turns[1:])  # the history came from the cache
    assert s.prefix_hit_rate_tokens > 0.3
    assert [row[1] for row in res.turns.rows].count(1) == 2  # two sessions logged for the replay
