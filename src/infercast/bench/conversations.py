"""Multi-turn chat sessions against any OpenAI-compatible server (``bench --conversations``).

Each session is a closed loop: a turn's request carries the whole history as chat
messages (every earlier user message and the answer the server actually streamed)
plus a new user message of random words; the next turn is sent ``think_s`` after
the previous answer's last chunk. Sessions and their lengths come from the
simulator's sampler (:class:`infercast.sim.conversations.SessionSampler`: the
shipped Mooncake sessions, synthetic ones, or a CSV), so ``simulate`` and
``bench`` draw the same workload. Sessions start at ``--request-rate`` per second
(Poisson, or gamma with ``--burstiness``), all at once (``inf``), or by
``--max-concurrency`` users each running sessions back to back.

A turn's cached prompt tokens come from the server's
``usage.prompt_tokens_details.cached_tokens`` (``infercast serve`` and vLLM with
``--enable-prompt-tokens-details`` report it); the summary's prefix-cache hit
rates count the turns that reported it.
"""

from __future__ import annotations

import asyncio
import csv
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from infercast.bench.client import BenchClient
from infercast.bench.datasets import RequestSpec, make_prompt
from infercast.bench.load import LoadResult, _monitor, _result, _wait_until, arrival_offsets
from infercast.metrics.records import RequestRecord


def conversation_sessions(cfg, rng: np.random.Generator) -> list[list[tuple[int, int, float]]]:
    """The run's sessions (warm-up ones first) as ``(new_tokens, output_tokens, think_s)`` turns."""
    from infercast.sim.conversations import ConversationSpec, SessionSampler

    source = cfg.conversations or "synthetic"
    given = source == "synthetic" or cfg.input_tokens_given
    spec = ConversationSpec(
        source=source,
        turns=cfg.turns,
        think_time_s=cfg.think_time_s,
        input_dist="fixed" if given else None,
        input_mean=cfg.input_tokens,
        output_dist="fixed" if source == "synthetic" or cfg.output_tokens_given else None,
        output_mean=cfg.output_tokens,
        max_model_len=cfg.max_input_tokens,
    )
    sampler = SessionSampler(spec, rng)
    return [sampler.session() for _ in range(cfg.num_requests + cfg.warmup_requests)]


class _Turns:
    """Every turn sent, for the summary and for ``--compare-sim``'s replay file."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, float, int, int, int, float]] = []

    def add(
        self, session: int, turn: int, rec: RequestRecord, new_tokens: int, think_s: float
    ) -> None:
        self.rows.append(
            (
                session,
                turn,
                rec.arrival_s,
                rec.prompt_tokens,
                new_tokens,
                rec.output_tokens,
                think_s,
            )
        )

    def write_csv(self, path: str | Path) -> None:
        """The measured sessions in ``sim.conversations``' file format (think times included)."""
        with Path(path).open("w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(
                (
                    "session",
                    "turn",
                    "arrival_s",
                    "input_tokens",
                    "new_input_tokens",
                    "output_tokens",
                    "think_s",
                )
            )
            for s, t, a, inp, new, out, think in self.rows:
                w.writerow((s, t, f"{a:.6f}", inp, max(new, 1), max(out, 1), f"{think:.6f}"))


async def _session(
    client: BenchClient,
    index: int,
    turns: list[tuple[int, int, float]],
    start_s: float,
    rng: np.random.Generator,
    finish: Callable[[RequestRecord], None],
    log: _Turns | None,
) -> None:
    """One session, turn by turn; a failed turn ends it."""
    history: list[dict[str, str]] = []
    prev_prompt = prev_out = 0
    at = start_s
    for k, (new, out, think) in enumerate(turns):
        if k:
            at = client.clock() + think
            await _wait_until(client.clock, at)
        text, _ = make_prompt(rng, new, client.tokenizer)
        messages = (*history, {"role": "user", "content": text})
        spec = RequestSpec(f"s{index}-t{k + 1}", text, new, out, messages=messages)
        answer: list[str] = []
        body = client.encode(spec)
        rec = await client.send(spec, client.clock() if k else at, body, answer)
        finish(rec)
        if log is not None:  # the turn's new tokens as the server counted them (template included)
            log.add(
                index,
                k + 1,
                rec,
                rec.prompt_tokens - prev_prompt - prev_out if k else rec.prompt_tokens,
                think if k else 0.0,
            )
        if not rec.ok:
            return
        prev_prompt, prev_out = rec.prompt_tokens, rec.output_tokens
        history = [*messages, {"role": "assistant", "content": answer[0] if answer else ""}]


async def run_conversations(
    client: BenchClient,
    sessions: list[list[tuple[int, int, float]]],
    cfg,
    rng: np.random.Generator,
    on_done: Callable[[RequestRecord], None] | None = None,
    log: _Turns | None = None,
) -> LoadResult:
    """Warm-up sessions one by one, then the measured ones; records of every measured turn."""
    warm, sessions = sessions[: cfg.warmup_requests], sessions[cfg.warmup_requests :]
    warm_recs: list[RequestRecord] = []
    for i, turns in enumerate(warm):
        await _session(client, -1 - i, turns[:1], client.clock(), rng, warm_recs.append, None)
    await client.warm_pool(cfg.concurrency or 0)
    lags: list[float] = []
    stop = asyncio.Event()
    monitor = asyncio.create_task(_monitor(client.clock, stop, lags))
    cpu0, wall0 = time.process_time(), client.clock()
    start = client.clock() + 0.02
    done: list[RequestRecord] = []

    def finish(rec: RequestRecord) -> None:
        done.append(rec)
        if on_done is not None:
            on_done(rec)

    if cfg.concurrency is not None:  # users running sessions back to back
        it = iter(enumerate(sessions))

        async def user() -> None:
            await _wait_until(client.clock, start)
            for i, turns in it:
                await _session(client, i, turns, client.clock(), rng, finish, log)

        await asyncio.gather(*(user() for _ in range(cfg.concurrency)))
    else:
        rate = cfg.request_rate
        offsets = (
            np.zeros(len(sessions))
            if rate == float("inf")
            else arrival_offsets(len(sessions), rate, rng, cfg.burstiness)
        )

        async def later(i: int, turns, t: float) -> None:
            await _wait_until(client.clock, t)
            await _session(client, i, turns, t, rng, finish, log)

        await asyncio.gather(
            *(
                later(i, s, start + float(o))
                for i, (s, o) in enumerate(zip(sessions, offsets, strict=True))
            )
        )
    stop.set()
    await monitor
    cpu = (time.process_time() - cpu0) / max(client.clock() - wall0, 1e-9)
    return _result(done, start, lags, cpu, client, 0, warm_recs)
