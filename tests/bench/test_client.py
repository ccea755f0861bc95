"""Client details without a server: token counting order, chunk spreading, one-shot reconnect."""

import asyncio

import pytest

from infercast.bench.client import BenchClient, ClientConfig, _count_tokens, _spread
from infercast.bench.datasets import RequestSpec
from infercast.metrics.records import RequestRecord

from .helpers import word_tokenizer


def test_spread_even_and_by_weight():
    assert _spread(5, 3, None) == [2, 2, 1]
    assert _spread(7, 3, [1, 3, 3]) == [1, 3, 3]
    assert _spread(10, 3, [1, 1, 1]) == [4, 3, 3]
    assert sum(_spread(1000, 7, [3, 1, 9, 2, 2, 5, 1])) == 1000


def test_usage_beats_tokenizer_beats_chunks_and_mismatch_is_flagged():
    texts = [" t0 t1", " t2 t3", " t4"]
    rec = RequestRecord("a", 0.0, 1)
    _count_tokens(rec, texts, {"completion_tokens": 5}, word_tokenizer())
    assert (rec.output_tokens, rec.token_count_source, rec.token_count_mismatch) == (
        5,
        "usage",
        None,
    )
    assert rec.chunk_tokens == [2, 2, 1]
    _count_tokens(rec, texts, {"completion_tokens": 9}, word_tokenizer())
    assert rec.token_count_mismatch == "usage=9 tokenizer=5"
    _count_tokens(rec, texts, None, word_tokenizer())
    assert (rec.output_tokens, rec.token_count_source) == (5, "tokenizer")
    _count_tokens(rec, texts, None, None)
    assert (rec.output_tokens, rec.token_count_source) == (3, "chunks")


SSE_OK = (
    b'data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"text":" b","finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
)


async def _raw_server(respond):
    """A bare HTTP/1.1 server: ``respond(conn_no, req_no)`` gives the bytes to answer, or None to
    close."""
    counter = {"conn": 0}

    async def handle(reader, writer):
        counter["conn"] += 1
        conn, req = counter["conn"], 0
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(
                next(
                    line.split(b":")[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            await reader.readexactly(length)
            req += 1
            body = respond(conn, req)
            if body is None:
                writer.close()
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


async def _send_all(respond, n):
    server, url = await _raw_server(respond)
    async with server:
        async with BenchClient(ClientConfig(base_url=url, model="m", timeout_s=5)) as client:
            recs = [
                await client.send(RequestSpec(f"r{i}", "hi", 1, 2), client.clock())
                for i in range(n)
            ]
            return recs, client.reconnects


def test_one_shot_reconnect_on_a_closed_pooled_connection():
    # connection 1 answers its first request, then closes when reused (llama.cpp's server)
    recs, reconnects = asyncio.run(
        _send_all(lambda conn, req: None if (conn, req) == (1, 2) else SSE_OK, 2)
    )
    assert [r.ok for r in recs] == [True, True] and reconnects == 1
    assert (
        recs[1].output_tokens == 2
        and recs[1].prompt_tokens == 3
        and recs[1].finish_reason == "length"
    )


def test_a_server_that_never_answers_fails_after_one_retry():
    recs, reconnects = asyncio.run(_send_all(lambda conn, req: None, 1))
    assert not recs[0].ok and recs[0].error.startswith("connection failed") and reconnects == 1


@pytest.mark.parametrize(
    "body,reason",
    [
        (b'data: {"choices":[{"index":0,"text":" a"}]}\n\n', "incomplete stream"),
        (b"data: {not json\n\n", "malformed chunk JSON"),
        (b'data: {"error":{"message":"x"}}\n\n', "server error event"),
    ],
)
def test_malformed_streams_fail_with_a_reason(body, reason):
    recs, _ = asyncio.run(_send_all(lambda conn, req: body, 1))
    assert not recs[0].ok and recs[0].error == reason
