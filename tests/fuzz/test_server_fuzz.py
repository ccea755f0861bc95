"""Generated requests against a live server, and a bounded load/fault run; the server keeps serving.

- Bodies: any JSON (objects with the real field names and values of every
  type, arrays, scalars), raw bytes, and odd strings (lone surrogates, NUL,
  32 kB). Each answer is 200, or an OpenAI ``{"error": ...}`` 4xx; never a
  500, never a dropped connection; afterwards ``/health`` is 200 and no KV
  block is held.
- Load/fault: a burst past the waiting queue (429s, nothing lost), streaming
  and non-streaming clients that disconnect, a client that sends its body
  slowly; then every KV block is free and a fresh request is served.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infercast.engine.http_limits import ServerLimits

MODEL = "random-tiny"
SERVER_EXAMPLES = 60
SETTINGS = settings(
    max_examples=SERVER_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    database=None,
)

FIELDS = [
    "model",
    "prompt",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "n",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "ignore_eos",
    "presence_penalty",
    "frequency_penalty",
    "user",
    "logprobs",
    "best_of",
    "echo",
    "logit_bias",
]
ODD_TEXT = st.sampled_from(
    ["", " ", "\ud800", "a\udfffb", "\x00", "x" * 32_000, "🙂" * 50, "<|endoftext|>", "\\u0000"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | ODD_TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)
# Mostly plausible values, so requests get past the type checks and reach the engine too.
PLAUSIBLE = {
    "model": st.just(MODEL),
    "prompt": st.text(max_size=40)
    | st.lists(st.integers(min_value=-5, max_value=600), min_size=0, max_size=8),
    "max_tokens": st.integers(min_value=-3, max_value=6),
    "temperature": st.floats(min_value=0, max_value=2)
    | st.sampled_from([1e-320, 5e-324, 2.0000001, -0.0]),
    "top_p": st.floats(min_value=0, max_value=1),
    "top_k": st.integers(-2, 2000),
    "seed": st.integers(min_value=-(2**64), max_value=2**65),
    "stream": st.booleans(),
    "stop": st.lists(st.text(max_size=3), max_size=5) | st.text(max_size=3),
    "messages": st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "system", "assistant", "robot"]),
                "content": st.text(max_size=20)
                | st.none()
                | st.lists(
                    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
                    max_size=2,
                ),
            }
        ),
        max_size=3,
    ),
}
BODIES = (
    st.fixed_dictionaries(
        {},
        optional={f: (PLAUSIBLE.get(f, JSON) | JSON) if f in PLAUSIBLE else JSON for f in FIELDS},
    ).map(lambda d: {"model": MODEL, "max_tokens": 2, **d})
    | JSON
)

LIMITS = ServerLimits(
    max_body_bytes=64_000, max_prompt_chars=20_000, header_timeout_s=1.0, body_timeout_s=1.0
)


@pytest.fixture(scope="module")
def server(start_server):
    with start_server(max_model_len=128, max_waiting=4, max_num_seqs=4, limits=LIMITS) as srv:
        yield srv


def _encode(body) -> bytes:
    # allow_nan: Python's json writes NaN; the server must refuse it, not crash on it.
    # surrogatepass: a lone surrogate goes out as its JSON escape, as a careless client sends it.
    return json.dumps(body).encode("utf-8", "surrogatepass")


def _check_answer(r: httpx.Response, what) -> None:
    assert r.status_code in (200, 400, 413, 429), (r.status_code, r.text[:300], what)
    if r.status_code != 200:
        err = r.json()["error"]
        assert err["type"] in ("invalid_request_error", "rate_limit_error") and err["message"]


def test_generated_requests_never_break_the_server(server):
    url, engine = server
    seen = {"chat": 0, "completions": 0}

    @SETTINGS
    @given(body=BODIES, chat=st.booleans())
    def check(body, chat):
        path = "/v1/chat/completions" if chat else "/v1/completions"
        seen["chat" if chat else "completions"] += 1
        r = httpx.post(
            f"{url}{path}",
            content=_encode(body),
            timeout=30,
            headers={"content-type": "application/json"},
        )
        _check_answer(r, body)

    check()
    assert sum(seen.values()) >= SERVER_EXAMPLES
    health = httpx.get(f"{url}/health", timeout=10)
    assert health.status_code == 200
    deadline = time.monotonic() + 10
    while engine.scheduler.kv.num_used_blocks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.scheduler.kv.num_used_blocks == 0


@SETTINGS
@given(
    raw=st.binary(max_size=200)
    | st.sampled_from(
        [
            b"",
            b"{",
            b"null",
            b"[]",
            b'{"model": "random-tiny", "prompt": "\\ud800"}',
            b'{"model": "random-tiny", "prompt": "x", "max_tokens": 1e400}',
            b'{"model": "random-tiny", "prompt": "x", "temperature": -Infinity}',
            b'\xef\xbb\xbf{"model": "random-tiny", "prompt": "x"}',
        ]
    )
)
def test_generated_raw_bytes_get_openai_errors(server, raw):
    url, _ = server
    r = httpx.post(
        f"{url}/v1/completions",
        content=raw,
        timeout=30,
        headers={"content-type": "application/json"},
    )
    _check_answer(r, raw)


# ---- bounded load and faults ---------------------------------------------------------
def _raw_post(url: str, body: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
        b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    return sock


def test_burst_disconnects_and_slow_clients_leave_the_server_serving(start_server):
    with start_server(max_model_len=256, max_waiting=8, max_num_seqs=4) as (url, engine):
        real = engine.step

        def slow_step():
            time.sleep(0.005)
            return real()

        engine.step = slow_step
        statuses: list[int] = []
        lock = threading.Lock()

        def one(stream: bool) -> None:
            body = {
                "model": MODEL,
                "prompt": "burst",
                "max_tokens": 30,
                "ignore_eos": True,
                "stream": stream,
            }
            r = httpx.post(f"{url}/v1/completions", json=body, timeout=60)
            with lock:
                statuses.append(r.status_code)

        # 1. a burst of 40 past a queue of 8 behind 4 running: 200s and clean 429s only
        burst = [threading.Thread(target=one, args=(i % 2 == 0,)) for i in range(40)]
        for t in burst:
            t.start()
        # 2. meanwhile: clients that leave, streaming and not, and a slow body
        long = json.dumps(
            {"model": MODEL, "prompt": "leave", "max_tokens": 200, "ignore_eos": True}
        ).encode()
        leavers = [_raw_post(url, long) for _ in range(3)]
        streamed = json.dumps(
            {
                "model": MODEL,
                "prompt": "leave",
                "max_tokens": 200,
                "ignore_eos": True,
                "stream": True,
            }
        ).encode()
        leavers += [_raw_post(url, streamed) for _ in range(3)]
        host, port = url.removeprefix("http://").split(":")
        slow = socket.create_connection((host, int(port)), timeout=10)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        time.sleep(0.3)
        for sock in leavers:
            sock.close()
        for t in burst:
            t.join(60)
        slow.close()
        assert len(statuses) == 40 and set(statuses) <= {200, 429}, statuses
        assert statuses.count(200) >= 4
        # 3. everything freed, and the server still answers
        deadline = time.monotonic() + 15
        while (
            engine.scheduler.kv.num_used_blocks or engine.num_running or engine.num_waiting
        ) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.scheduler.kv.num_used_blocks == 0 and not engine.num_running
        r = httpx.post(
            f"{url}/v1/completions",
            json={"model": MODEL, "prompt": "after", "max_tokens": 3},
            timeout=30,
        )
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
        assert httpx.get(f"{url}/health").json()["step_failures"] == 0
