"""bench as a careful client: bounded linear SSE parsing, usage cross-checked, no false
completions."""

from __future__ import annotations

import asyncio
import time

import pytest

from infercast.bench.client import _count_tokens
from infercast.bench.sse import SSEDecoder, SSEError
from infercast.metrics.records import RequestRecord

from .test_client import _send_all


def test_a_long_line_without_newline_is_linear_and_bounded():
    d = SSEDecoder(max_line_bytes=2**30)
    block = b"x" * 65536
    start = time.perf_counter()
    for _ in range(256):  # 16 MiB: the old decoder rescanned the buffer on every block
        d.feed(block, 0.0)
    assert time.perf_counter() - start < 2.0
    small = SSEDecoder(max_line_bytes=1000)
    with pytest.raises(SSEError):
        small.feed(b"data: " + b"y" * 2000, 0.0)
    with pytest.raises(SSEError):  # many data lines adding up to a huge event
        for _ in range(20):
            small.feed(b"data: " + b"z" * 100 + b"\n", 0.0)


def test_events_split_anywhere_still_parse():
    stream = b'data: {"a": 1}\r\n\r\n: c\n\ndata: x\ndata: y\n\ndata: [DONE]\n\n'
    for cut in range(1, len(stream)):
        d = SSEDecoder()
        got = d.feed(stream[:cut], 1.0) + d.feed(stream[cut:], 2.0) + d.close(3.0)
        assert [data for _, data in got] == [b'{"a": 1}', b"x\ny", b"[DONE]"]


def test_usage_larger_than_the_streamed_text_is_not_trusted():
    rec = RequestRecord("a", 0.0, 1)
    _count_tokens(rec, [" a", " b", " c", " d"], {"completion_tokens": 1000}, None)
    assert rec.output_tokens == 4 and rec.token_count_source == "chunks"
    assert "usage=1000" in rec.token_count_mismatch
    for bad in (
        {"completion_tokens": "7"},
        {"completion_tokens": True},
        {"completion_tokens": -3},
        {"completion_tokens": 2.5},
    ):
        _count_tokens(rec, [" a", " b"], bad, None)
        assert rec.token_count_source == "chunks" and rec.output_tokens == 2


@pytest.mark.parametrize(
    "body, reason",
    [
        (
            b'data: {"usage":{"completion_tokens":5}}\n\ndata: [DONE]\n\n',
            "no choices in the stream",
        ),
        (b"data: [DONE]\n\n", "no choices in the stream"),
        (b"data: [1, 2]\n\ndata: [DONE]\n\n", "malformed chunk: not a JSON object"),
        (b'data: {"choices": "x"}\n\ndata: [DONE]\n\n', "malformed chunk: choices"),
    ],
)
def test_streams_without_choices_are_failures_not_completions(body, reason):
    recs, _ = asyncio.run(_send_all(lambda conn, req: body, 1))
    assert not recs[0].ok and recs[0].error.startswith(reason)


def test_a_huge_line_fails_the_request():
    body = b"data: " + b"q" * (9 * 2**20)  # past the 8 MiB line limit, no newline
    recs, _ = asyncio.run(_send_all(lambda conn, req: body, 1))
    assert not recs[0].ok and recs[0].error.startswith("malformed stream")
