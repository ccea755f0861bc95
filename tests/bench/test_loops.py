"""The client's event loop: aiohttp's request-body writer starts at once (Python 3.11 backport of
eager_start)."""

import asyncio

import aiohttp
import pytest

from infercast.bench import loops


def test_aiohttp_body_writer_is_the_coroutine_the_factory_knows():
    # a renamed writer would silently bring back the 2-4 ms queueing at 64 streams
    assert aiohttp.ClientRequest.write_bytes.__qualname__ == loops._AIOHTTP_BODY_WRITER


class ClientRequest:  # same qualname as aiohttp's writer: "ClientRequest.write_bytes"
    def __init__(self) -> None:
        self.log: list[str] = []

    async def write_bytes(self, gate: asyncio.Future | None, fail: bool = False) -> str:
        self.log.append("first step")
        if fail:
            raise OSError("boom")
        if gate is not None:
            self.log.append(await gate)
        return "written"


async def _scenario() -> None:
    loop = asyncio.get_running_loop()
    loop.set_task_factory(loops._eager_body_writes)
    req = ClientRequest()
    done = asyncio.create_task(req.write_bytes(None))
    assert (
        req.log == ["first step"] and done.done() and done.result() == "written"
    )  # ran before any yield

    gate = loop.create_future()
    task = asyncio.create_task(req.write_bytes(gate))
    assert req.log == ["first step", "first step"] and not task.done()
    gate.set_result("resumed")
    assert await task == "written" and req.log[-1] == "resumed"

    failed = asyncio.create_task(req.write_bytes(None, fail=True))
    with pytest.raises(OSError, match="boom"):
        await failed

    hung = asyncio.create_task(req.write_bytes(loop.create_future()))
    await asyncio.sleep(0)
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung

    async def other() -> list[str]:
        return req.log[-1:]

    lazy = asyncio.create_task(other())  # any other coroutine: an ordinary, lazily started task
    assert isinstance(lazy, asyncio.Task) and not lazy.done()
    await lazy


def test_eager_writer_steps_at_once_resumes_raises_and_cancels():
    with asyncio.Runner(loop_factory=loops.new_event_loop) as runner:
        runner.run(_scenario())
