"""The serving loop's own cost: what ``serve`` does per step and per token besides the forward.

``infercast machine`` fits the engine's forward (:mod:`.rate_probe`); a served step also
schedules (``Scheduler.schedule`` and ``update``), samples each logits row, detokenizes and
checks stops (``Generation.append``), and the server encodes each token as an SSE chunk
(``server._Stream.sse``). This module times that code, the engine's own, with the forward
replaced by a stub that hands back fixed logits rows of the model's vocabulary:

- **per step and per sampled token on the engine thread**: ``Engine.step`` over decode
  steps of ``b`` greedy requests (what benchmark clients send: temperature 0), at several
  ``b``; the line ``a + c * b`` through the per-step CPU times gives ``a`` (per step) and
  ``c`` (per token);
- **per streamed token on the event loop**: the server's SSE generator over those steps'
  events, from its queue to the chunk text (the socket write is not included);
- **per request**: admitting a streamed completion request of a 128-token prompt: the
  handler's body validation, tokenization and checks, and ``Engine.add`` (HTTP parsing by
  uvicorn is not included).

:func:`measure` returns both; ``infercast machine`` adds the per-step part to the fitted
``step_overhead_s``, writes the per-token parts as ``token_overhead_s`` and the per-request
one as ``request_admit_s`` (:mod:`infercast.cost.efficiency`). Charging the event loop's work
in full to the step assumes one core for ``serve`` (its threads share the GIL; measured
2026-12-04 on the Zen 5, served int8 SmolLM2 at 4 requests: the engine thread 13.3 s of CPU,
the event loop 0.15 s: ``benchmarks/serve_step_profile.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.rate_probe import EVICT_BYTES

BATCHES = (1, 4, 8)
DECODE_STEPS = 24  # timed decode steps per run
PROMPT_TOKENS = 16
ADMIT_PROMPT_TOKENS = 128  # the prompt whose admission is timed (bench's and the docs' runs)


@dataclass(frozen=True)
class ServingCost:
    """Measured seconds of the serving loop's work outside the forward (best of the runs)."""

    admit_s: float  # per request on the event loop: body, tokenization, checks, Engine.add
    step_s: float  # per step: scheduling and bookkeeping
    token_s: float  # per sampled token on the engine thread: sampling, detokenizing, stops
    stream_s: float  # per streamed token on the event loop: the SSE chunk
    per_batch_step_s: tuple[tuple[int, float], ...]  # (b, CPU seconds of one decode step)

    @property
    def token_overhead_s(self) -> float:
        """Everything charged per sampled token."""
        return self.token_s + self.stream_s

    def as_dict(self) -> dict:
        return {
            "admit_s": self.admit_s,
            "step_s": self.step_s,
            "token_s": self.token_s,
            "stream_s": self.stream_s,
            "per_batch_step_s": [list(x) for x in self.per_batch_step_s],
        }


class _StubForward:
    """Stands in for the model: each row that samples gets one of a few fixed logits rows."""

    def __init__(self, vocab_size: int, seed: int = 3) -> None:
        rng = np.random.default_rng(seed)
        self.rows = rng.standard_normal((16, vocab_size), dtype=np.float32)
        self.i = 0

    def forward(self, seqs, kv, all_logits: bool = False) -> list:
        out = []
        for s in seqs:
            if s.want_logits:
                out.append(self.rows[self.i % len(self.rows)])
                self.i += 1
            else:
                out.append(None)
        return out


def _engine(cfg: EngineModelConfig, tokenizer, max_num_seqs: int):
    """A real :class:`~infercast.engine.engine.Engine` on a one-layer, 64-wide random model of
    ``cfg``'s vocabulary (the forward is stubbed after), with ``tokenizer``."""
    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.loader import LoadedModel
    from infercast.engine.weights import pack_weights, random_weights

    small = replace(
        cfg,
        hidden_size=64,
        num_heads=4,
        num_kv_heads=4,
        head_dim=16,
        intermediate_size=64,
        num_layers=1,
        rope_scaling=None,
    )
    w = pack_weights(random_weights(small, seed=0))
    loaded = LoadedModel("probe", small, w, tokenizer, 0)
    config = EngineConfig(max_num_seqs=max_num_seqs, kv_cache_bytes=2**24, max_model_len=512)
    eng = Engine(loaded, config, time.monotonic, np.random.default_rng(0))
    eng.model = _StubForward(cfg.vocab_size)
    return eng


def _decode_run(
    cfg, tokenizer, b: int, steps: int, evict: np.ndarray | None = None
) -> tuple[float, list]:
    """CPU seconds of one decode step of ``b`` greedy requests (mean over ``steps``) and the
    token events of those steps; ``evict`` is read (untimed) before each step, as a served
    step's forward streams the weights through the caches."""
    from infercast.engine.sampling import SamplingParams

    eng = _engine(cfg, tokenizer, b)
    rng = np.random.default_rng(4)
    params = SamplingParams(max_tokens=steps + 2, temperature=0.0, ignore_eos=True)
    for i in range(b):
        ids = [int(x) for x in rng.integers(0, cfg.vocab_size, PROMPT_TOKENS)]
        eng.add(f"r{i}", ids, params)
    eng.step()  # the prefill step: every request samples its first token
    events: list = []
    cpu = 0.0
    for _ in range(steps):
        if evict is not None:
            evict.sum()
        c0 = time.process_time()
        events += eng.step()
        cpu += time.process_time() - c0
    return cpu / steps, events


def _stream_s(events: Sequence) -> float:
    """CPU seconds per event of the server's SSE generator (``server._Stream.sse``)."""
    from infercast.engine.server import _Stream

    async def consume() -> float:
        q: asyncio.Queue = asyncio.Queue()
        st = SimpleNamespace(model_name="probe", engine=SimpleNamespace(abort=lambda rid: None))
        stream = _Stream(st, "probe", q, PROMPT_TOKENS, chat=False, include_usage=False)
        c0 = time.process_time()
        for ev in events:
            q.put_nowait(replace(ev, request_id="probe", finish_reason=None))
        q.put_nowait(replace(events[-1], request_id="probe", finish_reason="length"))
        async for _chunk in stream.sse():
            pass
        return (time.process_time() - c0) / (len(events) + 1)

    return asyncio.run(consume())


def _admit_s(cfg: EngineModelConfig, tokenizer, runs: int, prompt_tokens: int) -> float:
    """CPU seconds to admit one streamed completion request of ``prompt_tokens`` random tokens'
    text, as the server's ``/v1/completions`` handler and the engine thread's ``Engine.add`` do:
    validate the JSON body, tokenize the prompt, check it, queue it (best of ``runs`` x 8)."""
    import json

    from infercast.engine import protocol as p

    eng = _engine(cfg, tokenizer, 8)
    rng = np.random.default_rng(5)
    text = tokenizer.decode([int(x) for x in rng.integers(0, cfg.vocab_size, prompt_tokens)])
    body = json.dumps(
        {
            "model": "probe",
            "prompt": text,
            "max_tokens": 64,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
    )
    best = float("inf")
    for i in range(8 * runs):
        c0 = time.process_time()
        req = p.CompletionRequest.model_validate_json(body)
        ids = tokenizer.encode(req.prompt, add_bos=True)
        params = req.sampling(256)
        eng.check_prompt(len(ids), params.max_tokens)
        if any(not 0 <= t < cfg.vocab_size for t in ids):
            raise AssertionError("the tokenizer gave an id outside the vocabulary")
        eng.add(f"a{i}", ids, params)
        best = min(best, time.process_time() - c0)
        eng.abort(f"a{i}")
    return best


def measure(
    cfg: EngineModelConfig,
    tokenizer,
    runs: int = 3,
    batches: Sequence[int] = BATCHES,
    steps: int = DECODE_STEPS,
    evict_bytes: int = EVICT_BYTES,
    prompt_tokens: int = ADMIT_PROMPT_TOKENS,
) -> ServingCost:
    """Time the serving loop's work (module doc): best of ``runs`` per batch size, then the
    line through them. ``evict_bytes`` (0: none) are read before each step."""
    evict = np.ones(evict_bytes // 4, dtype=np.float32) if evict_bytes >= 4 else None
    per_b, events = [], []
    for b in batches:
        best = float("inf")
        for _ in range(runs):
            t, evs = _decode_run(cfg, tokenizer, b, steps, evict)
            best = min(best, t)
            events = evs if len(evs) > len(events) else events
        per_b.append((b, best))
    bs = np.array([b for b, _ in per_b], dtype=float)
    ts = np.array([t for _, t in per_b])
    if len(set(bs)) > 1:
        slope, intercept = np.polyfit(bs, ts, 1)
        if intercept < 0:  # through the origin: all of it per token
            slope, intercept = float(ts @ bs / (bs @ bs)), 0.0
        slope = max(float(slope), 0.0)
    else:
        slope, intercept = float(ts[0] / bs[0]), 0.0
    stream = min(_stream_s(events) for _ in range(runs)) if events else 0.0
    admit = _admit_s(cfg, tokenizer, runs, prompt_tokens)
    per_batch = tuple((b, float(t)) for b, t in per_b)
    return ServingCost(admit, float(intercept), slope, stream, per_batch)
