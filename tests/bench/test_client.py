"""Client details without a server: token counting order, chunk spreading, one-shot reconnect."""

import asyncio

import httpx
import pytest

from infercast.bench.client import BenchClient, ClientConfig, _count_tokens, _spread
from infercast.bench.datasets import RequestSpec
from infercast.metrics.records import RequestRecord

from .helpers import word_tokenizer


class _Body(httpx.AsyncByteStream):
    """A streamed (not pre-read) body for httpx.MockTransport."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self):
        yield self.data


def test_spread_even_and_by_weight():
    assert _spread(5, 3, None) == [2, 2, 1]
    assert _spread(7, 3, [1, 3, 3]) == [1, 3, 3]
    assert _spread(10, 3, [1, 1, 1]) == [4, 3, 3]
    assert sum(_spread(1000, 7, [3, 1, 9, 2, 2, 5, 1])) == 1000


def test_usage_beats_tokenizer_beats_chunks_and_mismatch_is_flagged():
    texts = [" t0 t1", " t2 t3", " t4"]
    rec = RequestRecord("a", 0.0, 1)
    _count_tokens(rec, texts, {"completion_tokens": 5}, word_tokenizer())
    assert (rec.output_tokens, rec.token_count_source, rec.token_count_mismatch) == (5, "usage", None)
    assert rec.chunk_tokens == [2, 2, 1]
    _count_tokens(rec, texts, {"completion_tokens": 9}, word_tokenizer())
    assert rec.token_count_mismatch == "usage=9 tokenizer=5"
    _count_tokens(rec, texts, None, word_tokenizer())
    assert (rec.output_tokens, rec.token_count_source) == (5, "tokenizer")
    _count_tokens(rec, texts, None, None)
    assert (rec.output_tokens, rec.token_count_source) == (3, "chunks")


SSE_OK = (b'data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n'
          b'data: {"choices":[{"index":0,"text":" b","finish_reason":"length"}]}\n\n'
          b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n')


def test_one_shot_reconnect_on_a_closed_pooled_connection():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:  # the pooled connection was closed by the server
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, stream=_Body(SSE_OK), headers={"content-type": "text/event-stream"})

    async def go() -> tuple[RequestRecord, int]:
        cfg = ClientConfig(base_url="http://mock/v1", model="m")
        async with BenchClient(cfg, transport=httpx.MockTransport(handler)) as client:
            rec = await client.send(RequestSpec("r", "hi", 1, 2), client.clock())
            return rec, client.reconnects

    rec, reconnects = asyncio.run(go())
    assert rec.ok and rec.output_tokens == 2 and reconnects == 1 and len(calls) == 2
    assert rec.prompt_tokens == 3 and rec.finish_reason == "length"


@pytest.mark.parametrize("body,reason", [(b'data: {"choices":[{"index":0,"text":" a"}]}\n\n', "incomplete stream"),
                                         (b"data: {not json\n\n", "malformed chunk JSON"),
                                         (b'data: {"error":{"message":"x"}}\n\n', "server error event")])
def test_malformed_streams_fail_with_a_reason(body, reason):
    async def go() -> RequestRecord:
        transport = httpx.MockTransport(lambda r: httpx.Response(200, stream=_Body(body)))
        async with BenchClient(ClientConfig(base_url="http://m/v1", model="m"), transport=transport) as c:
            return await c.send(RequestSpec("r", "hi", 1, 2), c.clock())

    rec = asyncio.run(go())
    assert not rec.ok and rec.error == reason
