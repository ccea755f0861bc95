"""Speculative decoding in the simulator: per-request acceptance, verify steps of k + 1 tokens.

Each request draws its own acceptance rate ``a`` once (Beta with the configured
mean and spread, seeded by the run's seed), as acceptance differs across
prompts and domains. Every step in which a request decodes is a *verify* step:
the drafter proposes k tokens, the target checks them in one step of k + 1 new
tokens per decoding sequence, and the request gains ``m`` tokens, where

    m - 1 ~ truncated geometric:  P(m - 1 = j) = a^j (1 - a) for j < k,  a^k for j = k

(i.i.d. acceptance; E[m] = (1 - a^(k+1)) / (1 - a), Leviathan et al. 2023 eq. 1),
capped at the tokens the request still has to produce. The m tokens reach the
client at the step's end, as one chunk.

Step time = target step with k + 1 (or the tree's ``verify_tokens``) new tokens
per decoding sequence, plus k sequential drafter decode steps over the decoding
sequences (``SpeculativeModel``'s drafter: an EAGLE/MTP head or a separate model);
prefill chunks in the same step cost what they cost without speculation.

Scheduler accounting (``infercast.sched`` unchanged): the step's tokens are
reported through ``Scheduler.update(batch, num_sampled)``; the scheduler writes
the KV of accepted tokens in the request's next step (up to k tokens late), and
counts one token of its budget per decoding sequence where vLLM counts k + 1.
The simulator's closed-form fast path assumes one token per step, so runs with
speculative decoding are always exact (one event per step).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.cost.speculative import SpeculativeConfig, SpeculativeModel, beta_params
from infercast.sched import Request
from infercast.sim.collect import finished_record
from infercast.sim.replica import Replica, _BatchStep


class SpecTimer:
    """Costs a scheduler batch as one speculative step (see module doc)."""

    def __init__(self, model: SpeculativeModel):
        self.spec = model
        self.target = model.target
        self.drafter = model.drafter
        self.config: SpeculativeConfig = model.config
        self.kv_capacity_tokens = self._kv_capacity()
        self.affine_context_limit = float("inf")  # the replica lists every request anyway

    def _kv_capacity(self) -> int:
        """Target KV capacity less the drafter's KV (a separate draft model or a head keeps its
        own)."""
        t, d = self.target, self.drafter
        share = d.kv_bytes_per_token / (t.kv_bytes_per_token + d.kv_bytes_per_token)
        extra_weights = d.memory.weight_bytes if self.config.method == "draft" else 0.0
        free = max(t.kv_capacity_tokens * t.kv_bytes_per_token - extra_weights, 0.0)
        return int(free * (1 - share) / t.kv_bytes_per_token)

    def step_time_s(self, new: Sequence[int], cached: Sequence[float]) -> float:
        """A step without verification: the target's (a :class:`~infercast.sim.timer.StepTimer`)."""
        return self.target.step_time_s(new, cached)

    def verify_step_time_s(
        self, new: Sequence[int], cached: Sequence[int], verify: Sequence[bool]
    ) -> float:
        """Target step (sequences with ``verify`` widened to the verify width) + k drafter steps."""
        width = self.config.width
        wide = [max(n, width) if v else n for n, v in zip(new, verify, strict=True)]
        t = self.target.step_time_s(wide, cached)
        ctx = [c + n - 1 for n, c, v in zip(new, cached, verify, strict=True) if v]
        if not ctx:
            return t
        d = self.drafter
        overhead = d.profile.step_overhead_s  # one engine step: charged once, with the target
        ones = [1] * len(ctx)
        for i in range(self.config.k):
            t += d.step_time_s(ones, [c + i for c in ctx]) - overhead
        return t


def draw_acceptance(rng: np.random.Generator, mean: float, std: float) -> float:
    """One request's acceptance rate: Beta(mean, std), or the mean itself when std is 0."""
    if std <= 0 or mean in (0.0, 1.0):
        return mean
    alpha, beta = beta_params(mean, std)
    return float(rng.beta(alpha, beta))


def draw_tokens(rng: np.random.Generator, a: float, k: int) -> int:
    """Tokens one verify step yields: 1 + accepted drafts (truncated geometric, see module doc)."""
    if a <= 0.0:
        return 1
    if a >= 1.0:
        return k + 1
    # Accepted drafts = number of leading successes, at most k.
    return 1 + min(int(rng.geometric(1.0 - a)) - 1, k)


class _SpecStep(_BatchStep):
    """A plan: a batch whose decoding sequences verify drafts (every request listed)."""

    __slots__ = ("verify",)
    rep: SpecReplica

    def __init__(self, rep: SpecReplica) -> None:
        super().__init__(rep)
        self.verify: list[bool] = []

    def start(self, now: float) -> float | None:
        rep = self.rep
        batch = self.batch = rep.sched.schedule()
        if batch.is_empty:
            return None
        if batch.num_decode_seqs:
            raise RuntimeError("speculative replicas need a scheduler with compact_decodes=False")
        for rid in batch.preempted:
            rep._flush(rep.sched.requests[rid])
        seqs = batch.seqs
        for seq in seqs:
            req = seq.req
            if req.first_scheduled_s is None:
                req.first_scheduled_s = now
        verify = self.verify = [_verifies(s) for s in seqs]
        dt = rep.timer.verify_step_time_s(
            [s.num_new_tokens for s in seqs], [s.num_cached_tokens for s in seqs], verify
        )
        self.num_seqs = batch.num_seqs
        self.end_s = now + dt
        return dt

    def end(self, now: float) -> list[Request]:
        """Each sampling sequence draws its tokens (one chunk at ``now``); the scheduler counts."""
        rep = self.rep
        sampled: dict[str, int] = {}
        for seq, v in zip(self.batch.seqs, self.verify, strict=True):
            if not seq.samples:
                continue
            req = seq.req
            m = rep._draw(req) if v else 1
            sampled[seq.request_id] = m
            req.token_times.append(now)
            rep._chunks.setdefault(seq.request_id, []).append(m)
        return rep.sched.update(self.batch, sampled)


def _verifies(seq) -> bool:
    req = seq.req
    return seq.samples and req.num_output_tokens > 0 and seq.num_cached_tokens >= req.prompt_tokens


class SpecReplica(Replica):
    """A replica whose decode steps are speculative verify steps (exact mode only)."""

    timer: SpecTimer

    def __init__(self, *args, rng: np.random.Generator, **kwargs):
        kwargs["fast"] = False
        super().__init__(*args, **kwargs)
        self.rng = rng
        self._accept: dict[str, float] = {}
        self._chunks: dict[str, list[int]] = {}  # tokens per chunk (one chunk per step), by request
        self._batch_step = _SpecStep(self)

    def _draw(self, req) -> int:
        c = self.timer.config
        a = self._accept.get(req.request_id)
        if a is None:
            a = self._accept[req.request_id] = draw_acceptance(
                self.rng, c.acceptance, c.acceptance_std
            )
        left = req.max_output_tokens - req.num_output_tokens
        return max(1, min(draw_tokens(self.rng, a, c.k), left))

    def _finish(self, req, now: float) -> None:
        rid = req.request_id
        self._accept.pop(rid, None)
        chunks = self._chunks.pop(rid, [])
        self.outstanding_tokens -= req.prompt_tokens + req.max_output_tokens
        times = np.asarray(req.token_times, dtype=np.float64)
        rec = finished_record(req, req.first_scheduled_s, now, times, chunk_tokens=chunks)
        self.emit(rec, self.index)
