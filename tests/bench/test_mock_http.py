"""The mock's HTTP layer: routes, framing, keep-alive, and the client's warm connection pool."""

import asyncio

import httpx

from infercast.bench import loops
from infercast.bench.client import BenchClient, ClientConfig
from infercast.bench.datasets import RequestSpec
from infercast.bench.mock import MockConfig
from infercast.bench.mock_http import _EARLY_S, run_in_thread


def test_routes_framing_and_errors():
    with run_in_thread(MockConfig(ttft_s=0.001, itl_s=0.0, model_name="m1")) as (url, mock):
        with httpx.Client(base_url=url, timeout=5) as http:
            assert http.get("/models").json()["data"][0]["id"] == "m1"
            assert http.get("/nope").status_code == 404
            assert http.post("/completions", content=b"{not json").status_code == 400
            full = http.post(
                "/chat/completions",
                json={"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 3},
            )
            doc = full.json()
            assert doc["choices"][0]["message"]["content"] == " t0 t1 t2"
            assert doc["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
            stream = http.post(
                "/completions",
                json={"prompt": "x", "max_tokens": 2, "stream": True},
                headers={"x-request-id": "r-1"},
            )
            assert stream.headers["transfer-encoding"] == "chunked"
            assert stream.text.count("data: ") == 4 and stream.text.endswith("data: [DONE]\n\n")
            truth = http.get(url.removesuffix("/v1") + "/mock/truth").json()["requests"]
        assert [r["request_id"] for r in truth] == ["r-1"] and truth[0]["output_tokens"] == 2
        # the mock writes a chunk up to _EARLY_S before its time (loop timers are ms-grained)
        assert truth[0]["first_write_s"] - truth[0]["receipt_s"] >= 0.001 - _EARLY_S
        assert mock.connections_opened == 1  # one keep-alive connection for all six requests
        with httpx.Client(base_url=url, timeout=5, headers={"connection": "close"}) as http:
            assert http.get("/models").status_code == http.get("/models").status_code == 200
        assert mock.connections_opened == 3  # "Connection: close" honoured


async def _warm_then_send(url: str, n: int) -> tuple[int, list[bool]]:
    async with BenchClient(ClientConfig(base_url=url, model="m", timeout_s=5)) as client:
        opened = await client.warm_pool(n)
        specs = [RequestSpec(f"r{i}", "hi", 1, 2) for i in range(n)]
        recs = await asyncio.gather(*(client.send(s, client.clock()) for s in specs))
        return opened, [r.ok for r in recs]


def test_warm_pool_opens_the_connections_the_run_then_reuses():
    with run_in_thread(MockConfig(ttft_s=0.02, itl_s=0.001)) as (url, mock):
        opened, ok = loops.run(_warm_then_send(url, 4), eager_body_writes=True)
        assert opened == 4 and all(ok) and len(ok) == 4
        assert mock.connections_opened == 4  # the 4 concurrent requests found 4 idle connections
