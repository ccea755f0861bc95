"""The OpenAI-compatible server: streaming, errors, backpressure, disconnects, metrics."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

MODEL = "random-tiny"


@pytest.fixture(scope="module")
def slow_down(server_helpers):
    """conftest's slow_down: each step a little longer, or the tiny model finishes before a
    client acts."""
    return server_helpers[0]


@pytest.fixture(scope="module")
def server(start_server, slow_down):
    with start_server(max_model_len=512) as (url, engine):
        slow_down(engine)
        yield url, engine


def test_openai_client_parses_streams_and_bodies(server):
    openai = pytest.importorskip("openai")
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    assert [m.id for m in client.models.list().data] == [MODEL]
    body = client.completions.create(model=MODEL, prompt="Hello", max_tokens=6, temperature=0)
    assert body.usage.completion_tokens == 6 and body.choices[0].finish_reason == "length"
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="Hello",
            max_tokens=6,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == body.choices[0].text
    assert chunks[-1].usage.completion_tokens == 6 and chunks[-1].choices == []
    chat = list(
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
        )
    )
    assert chat[0].choices[0].delta.role == "assistant"
    assert chat[-1].choices[0].finish_reason == "length"
    full = client.chat.completions.create(
        model=MODEL, max_tokens=4, temperature=0, messages=[{"role": "user", "content": "hi"}]
    )
    assert full.choices[0].message.role == "assistant" and full.usage.completion_tokens == 4


@pytest.mark.parametrize(
    "body, needle",
    [
        (b"{not json", "not valid JSON"),
        ({"model": "gpt-9", "prompt": "x"}, "gpt-9"),
        ({"model": MODEL, "prompt": "x", "max_tokens": -3}, "max_tokens"),
        ({"model": MODEL, "prompt": "x" * 600}, "context"),
        ({"model": MODEL, "prompt": "x", "temperature": 7}, "temperature"),
        ({"model": MODEL}, "prompt"),
        ({"model": MODEL, "prompt": "x", "logprobs": 3}, "logprobs"),
        ({"model": MODEL, "prompt": "x", "n": 2}, "n"),
    ],
)
def test_bad_requests_get_openai_400(server, body, needle):
    url, _ = server
    if isinstance(body, bytes):
        r = httpx.post(
            f"{url}/v1/completions", content=body, headers={"content-type": "application/json"}
        )
    else:
        r = httpx.post(f"{url}/v1/completions", json=body)
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]
    assert r.json()["error"]["type"] == "invalid_request_error"


def _wait(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_disconnect_aborts_and_frees_kv_blocks(server):
    url, engine = server
    body = {
        "model": MODEL,
        "prompt": "tell me a long story",
        "max_tokens": 200,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", f"{url}/v1/completions", json=body) as r:
            lines = r.iter_lines()  # keep a reference: a dropped iterator closes the stream
            assert next(lines).startswith("data: ")
            health = httpx.get(f"{url}/health").json()
            assert health["running"] == 1 and health["kv_blocks_used"] > 0
        # leaving the block closes the connection mid-stream
    assert _wait(lambda: httpx.get(f"{url}/health").json()["kv_blocks_used"] == 0)
    metrics = httpx.get(f"{url}/metrics").text
    assert 'infercast_request_finished_total{finished_reason="abort"}' in metrics


def test_metrics_parse_as_prometheus_text(server):
    url, _ = server
    httpx.post(
        f"{url}/v1/completions", json={"model": MODEL, "prompt": "a", "max_tokens": 3}, timeout=10
    )
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)}
    for name in (
        "infercast_num_requests_running",
        "infercast_num_requests_waiting",
        "infercast_kv_cache_usage_ratio",
        "infercast_generation_tokens",
        "infercast_time_to_first_token_seconds",
        "infercast_time_per_output_token_seconds",
    ):
        assert name in families
    count = [
        s.value
        for s in families["infercast_time_to_first_token_seconds"].samples
        if s.name.endswith("_count")
    ]
    assert count and count[0] >= 1


def test_full_queue_gets_429_and_api_key_is_enforced(start_server, slow_down):
    with start_server(max_waiting=1, max_num_seqs=1, max_model_len=512, api_key="sesame") as (
        url,
        engine,
    ):
        slow_down(engine)
        auth = {"authorization": "Bearer sesame"}
        assert httpx.get(f"{url}/v1/models").status_code == 401
        long = {
            "model": MODEL,
            "prompt": "a",
            "max_tokens": 500,
            "ignore_eos": True,
            "stream": True,
        }
        with httpx.Client(timeout=10, headers=auth) as client:
            with client.stream("POST", f"{url}/v1/completions", json=long) as first:
                lines = first.iter_lines()  # keep a reference: a dropped iterator closes it
                next(lines)  # running now (the only slot)
                with client.stream("POST", f"{url}/v1/completions", json=long) as second:
                    assert second.status_code == 200  # queued
                    third = client.post(f"{url}/v1/completions", json={**long, "stream": False})
                    assert third.status_code == 429
                    assert "queue is full" in third.json()["error"]["message"]
        assert _wait(lambda: engine.scheduler.kv.num_used_blocks == 0 and not engine.num_waiting)
