"""The server survives every request: failures stay with their request, limits hold, health
tells."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import numpy as np
import pytest

from infercast.engine.http_limits import ServerLimits
from infercast.engine.sampling import SamplingError, SamplingParams, sample

MODEL = "random-tiny"
LIMITS = ServerLimits(
    max_body_bytes=20_000, max_prompt_chars=5_000, header_timeout_s=0.5, body_timeout_s=0.5
)


@pytest.fixture(scope="module", autouse=True)
def _helpers(server_helpers):
    global _slow_down, _wait
    _slow_down, _wait = server_helpers


def _ok(url: str, **extra) -> httpx.Response:
    body = {"model": MODEL, "prompt": "Hello", "max_tokens": 4, **extra}
    return httpx.post(f"{url}/v1/completions", json=body, timeout=20)


@pytest.fixture(scope="module")
def server(start_server):
    with start_server(max_model_len=256, limits=LIMITS) as (url, engine):
        yield url, engine


# ---- the sampler -----------------------------------------------------------------
def test_subnormal_temperature_samples_like_greedy():
    logits = np.array([0.5, 3.0, 1.0, 2.9], dtype=np.float32)
    rng = np.random.default_rng(0)
    assert sample(logits, SamplingParams(temperature=1e-320), rng) == 1


def test_logits_with_nan_raise_sampling_error_not_crash():
    with pytest.raises(SamplingError):
        sample(np.array([np.nan, 1.0]), SamplingParams(), np.random.default_rng(0))


def test_negative_seed_maps_to_a_numpy_seed():
    assert SamplingParams(seed=-1).numpy_seed == 2**64 - 1


# ---- requests that used to kill the engine ------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        {"seed": -5},
        {"seed": -(2**63)},
        {"temperature": 1e-320},
        {"temperature": 5e-324, "top_p": 1e-300},
    ],
)
def test_odd_but_valid_sampling_requests_are_served_and_the_engine_survives(server, extra):
    url, _ = server
    r = _ok(url, **extra)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
    assert httpx.get(f"{url}/health").status_code == 200
    assert _ok(url).status_code == 200


def test_seeded_negative_requests_are_reproducible(server):
    url, _ = server
    a, b = (_ok(url, seed=-7, max_tokens=8).json()["choices"][0]["text"] for _ in range(2))
    assert a == b


# ---- strict validation --------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, param",
    [
        ({"max_tokens": "4"}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 4.5}, "max_tokens"),
        ({"temperature": "0.5"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"top_k": 2.0}, "top_k"),
        ({"seed": 2**64}, "seed"),
        ({"seed": "1"}, "seed"),
        ({"stream": 1}, "stream"),
        ({"prompt": [1, "a"]}, "prompt"),
        ({"prompt": [True]}, "prompt"),
        ({"model": 5}, "model"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"stop": [""]}, "stop"),
        ({"prompt": [10**9]}, "prompt"),
        ({"top_p": 0}, "top_p"),
    ],
)
def test_wrong_types_and_ranges_are_openai_400s(server, extra, param):
    url, _ = server
    r = _ok(url, **extra)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and param in err["message"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "random-tiny", "prompt": "x", "temperature": NaN}',
        b'{"model": "random-tiny", "prompt": "x", "temperature": Infinity}',
        b'{"model": "random-tiny", "prompt": "\\ud800"}',
        b'{"model": "random-tiny", "prompt": "x", "stop": "\\udfff"}',
        b'{"model": "random-tiny", "prompt": "x", "user": "a\\ud800b"}',
        b"[1, 2]",
        b'"text"',
        b"\xff\xfe",
    ],
)
def test_non_finite_numbers_lone_surrogates_and_non_objects_are_400(server, raw):
    url, _ = server
    r = httpx.post(
        f"{url}/v1/completions", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_chat_message_with_lone_surrogate_is_400(server):
    url, _ = server
    raw = b'{"model": "random-tiny", "messages": [{"role": "user", "content": "\\ud83d"}]}'
    r = httpx.post(
        f"{url}/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "method, path, status",
    [("GET", "/nope", 404), ("GET", "/v1/completions", 405), ("POST", "/v1/models", 405)],
)
def test_unknown_routes_and_methods_answer_in_openai_format(server, method, path, status):
    url, _ = server
    r = httpx.request(method, f"{url}{path}")
    assert r.status_code == status and set(r.json()["error"]) >= {"message", "type", "code"}


# ---- size limits --------------------------------------------------------------------
def test_body_over_the_limit_is_413_by_header_and_by_chunks(server):
    url, _ = server
    big = {"model": MODEL, "prompt": "x" * 30_000}
    r = httpx.post(f"{url}/v1/completions", json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"

    def chunks():  # no content-length: the limit is counted as bytes arrive
        for _ in range(30):
            yield b"x" * 1000

    r = httpx.post(
        f"{url}/v1/completions", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


def test_prompt_over_the_character_limit_is_400_before_tokenizing(server):
    url, _ = server
    r = _ok(url, prompt="y" * 6_000)
    assert r.status_code == 400 and r.json()["error"]["code"] == "prompt_too_long"
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "y" * 3000}] * 2}
    r = httpx.post(f"{url}/v1/chat/completions", json=chat)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"


# ---- slow clients -------------------------------------------------------------------
def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def test_slowloris_headers_are_cut_off(server):
    url, _ = server
    with _connect(url) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        time.sleep(1.0)  # header timeout is 0.5 s
        sock.settimeout(3)
        assert sock.recv(100) == b""  # closed by the server


def test_slow_body_gets_408(server):
    url, _ = server
    with _connect(url) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mo'
        )
        sock.settimeout(5)
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408")


# ---- failures stay with their request ----------------------------------------------
def test_a_failing_step_fails_its_requests_and_the_engine_goes_on(start_server):
    with start_server(max_model_len=256) as (url, engine):
        real = engine.model.forward
        calls = {"n": 0}

        def flaky(*args, **kw):
            calls["n"] += 1
            if calls["n"] == 1:
                raise FloatingPointError("injected")
            return real(*args, **kw)

        engine.model.forward = flaky
        r = _ok(url)
        assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
        assert "FloatingPointError" in r.json()["error"]["message"]
        assert _ok(url).status_code == 200
        health = httpx.get(f"{url}/health")
        assert health.status_code == 200 and health.json()["step_failures"] == 1
        assert health.json()["kv_blocks_used"] == 0


def test_a_sampling_failure_fails_one_request_of_a_batch(start_server):
    with start_server(max_model_len=256) as (url, engine):
        import infercast.engine.engine as eng_mod

        real = eng_mod.sample

        def picky(row, params, rng):
            if params.seed == 13:
                raise SamplingError("injected")
            return real(row, params, rng)

        eng_mod.sample = picky
        try:
            results = {}

            def send(seed):
                results[seed] = _ok(url, seed=seed, max_tokens=8)

            threads = [threading.Thread(target=send, args=(s,)) for s in (12, 13, 14)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            eng_mod.sample = real
        assert results[13].status_code == 500
        assert results[12].status_code == results[14].status_code == 200
        assert _wait(lambda: engine.scheduler.kv.num_used_blocks == 0)


def test_stream_of_a_failed_request_ends_with_an_error_event(start_server):
    with start_server(max_model_len=256) as (url, engine):
        real = engine.model.forward
        engine.model.forward = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom"))
        body = {"model": MODEL, "prompt": "Hi", "max_tokens": 4, "stream": True}
        r = httpx.post(f"{url}/v1/completions", json=body, timeout=20)
        events = [json.loads(x[6:]) for x in r.text.split("\n\n") if x.startswith("data: {")]
        assert events and events[-1]["error"]["type"] == "server_error"
        engine.model.forward = real


def test_a_dead_engine_makes_health_non_200_and_requests_503(start_server):
    with start_server(max_model_len=256) as (url, engine):
        engine.model.forward = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("broken"))
        for _ in range(3):  # three failed steps in a row: the engine gives up
            _ok(url)
        assert _wait(lambda: httpx.get(f"{url}/health").status_code == 503)
        health = httpx.get(f"{url}/health").json()
        assert health["status"] == "error" and "failed" in health["error"]
        r = _ok(url)
        assert r.status_code == 503 and r.json()["error"]["code"] == "engine_stopped"


# ---- disconnects --------------------------------------------------------------------
def test_non_streaming_client_that_leaves_is_aborted_and_frees_kv(start_server):
    with start_server(max_model_len=512) as (url, engine):
        _slow_down(engine, 0.01)
        body = json.dumps(
            {"model": MODEL, "prompt": "a long story", "max_tokens": 400, "ignore_eos": True}
        ).encode()
        socks = []
        for _ in range(4):
            sock = _connect(url)
            sock.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body
            )
            socks.append(sock)
        assert _wait(lambda: engine.num_running == 4)
        assert engine.scheduler.kv.num_used_blocks > 0
        for sock in socks:
            sock.close()
        # 400 tokens at >= 10 ms a step would hold the blocks for 4 s; aborts free them at once
        assert _wait(
            lambda: engine.scheduler.kv.num_used_blocks == 0 and not engine.num_running,
            timeout_s=2.5,
        )
        assert _ok(url).status_code == 200
