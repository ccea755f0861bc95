"""The scheduler: requests in, one :class:`~infercast.sched.batch.Batch` per step out.

Hardware-free (tokens and blocks only) and shared unchanged by the simulator
and the CPU engine. One engine step is::

    batch = scheduler.schedule()          # who computes how many tokens now
    ...run or cost the batch...
    done = scheduler.update(batch, num_sampled, finished)   # advance, free finished

API (stable; the engine builds on it):

- ``Scheduler(SchedulerConfig(policy="chunked", max_num_seqs=..., max_num_batched_tokens=...,
  block_size=16, num_blocks=..., enable_prefix_caching=False))``
- ``add_request(Request) -> bool``: False when it can never run (status REJECTED,
  ``reject_reason`` says why, e.g. it needs more KV blocks than exist).
- ``schedule() -> Batch``: per request, new tokens this step, tokens already
  cached and its block table; ``batch.preempted`` lists requests whose KV was
  dropped to make room (they recompute later).
- ``update(batch, num_sampled=None, finished=()) -> list[Request]``:
  ``num_sampled[request_id]`` = tokens sampled this step (default 1 for every
  sequence whose ``samples`` is True); ``finished`` = ids that hit a stop
  condition (EOS). A request also finishes at ``max_output_tokens``. Returns the
  requests finished by this step; their blocks are already freed.
- ``abort(request_id)``: remove it wherever it is and free its blocks.
- Fast path (simulator): ``decode_horizon(max_steps)`` says how many coming
  steps are certainly the same all-decode batch, ``advance_decode(k)`` applies
  k of them at once. Running them one by one gives the same state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from infercast.errors import ConfigError
from infercast.sched.batch import Batch, ScheduledSeq
from infercast.sched.kv_cache import BlockManager, cdiv
from infercast.sched.request import Request, RequestStatus

POLICY_NAMES = ("static", "continuous", "chunked")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Limits of one replica's scheduler (validated on construction).

    ``max_num_batched_tokens`` is the token budget of one step (vLLM's name);
    ``static`` and ``continuous`` reject prompts longer than it, as vLLM v0 does.
    ``emit_block_tables=False`` leaves ``ScheduledSeq.block_table`` empty
    (the simulator does not need it; copying tables costs time).
    """

    policy: str = "chunked"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    num_blocks: int = 4096
    enable_prefix_caching: bool = False
    max_model_len: int | None = None
    emit_block_tables: bool = True

    def __post_init__(self) -> None:
        if self.policy not in POLICY_NAMES:
            raise ConfigError(
                f"scheduler policy {self.policy!r}: choose one of {', '.join(POLICY_NAMES)}"
            )
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_blocks"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)}: must be a positive integer")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM enforces the same: otherwise running decodes could be left out of a step.
            raise ConfigError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} < max_num_seqs={self.max_num_seqs}: "
                "raise max_num_batched_tokens or lower max_num_seqs"
            )
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ConfigError(f"max_model_len={self.max_model_len}: must be at least 2 tokens")


class Scheduler:
    """Request queues, the KV block manager and a batching policy (see module doc)."""

    def __init__(self, config: SchedulerConfig):
        from infercast.sched.policies import make_policy

        self.config = config
        self.kv = BlockManager(config.num_blocks, config.block_size, config.enable_prefix_caching)
        self.policy = make_policy(config.policy)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # admission order; the last is preempted first
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0

    # ---- public API -------------------------------------------------------------
    def add_request(self, req: Request) -> bool:
        """Queue a request, or reject it (False) when it could never run."""
        reason = self._reject_reason(req)
        if reason is not None:
            req.status = RequestStatus.REJECTED
            req.finish_reason = "rejected"
            req.reject_reason = reason
            return False
        if req.request_id in self.requests:
            raise ValueError(f"duplicate request id {req.request_id!r}")
        req.status = RequestStatus.WAITING
        self.requests[req.request_id] = req
        self.waiting.append(req)
        return True

    def schedule(self) -> Batch:
        """The next step's batch (empty when nothing can run)."""
        entries, preempted = self.policy.schedule(self)
        emit = self.config.emit_block_tables
        seqs = tuple(
            ScheduledSeq(
                req.request_id,
                n,
                req.num_computed_tokens,
                tuple(req.block_table) if emit else (),
                req.num_computed_tokens + n == req.num_tokens,
            )
            for req, n in entries
        )
        return Batch(seqs, tuple(preempted))

    def update(
        self,
        batch: Batch,
        num_sampled: Mapping[str, int] | None = None,
        finished: Collection[str] = (),
    ) -> list[Request]:
        """Apply a step's result; return the requests it finished (blocks freed)."""
        done: list[Request] = []
        requests = self.requests
        register = self.config.enable_prefix_caching
        for seq in batch.seqs:
            req = requests.get(seq.request_id)
            if req is None or req.status is not RequestStatus.RUNNING:
                continue  # aborted while the step ran
            req.num_computed_tokens += seq.num_new_tokens
            if register:
                self._register_blocks(req)
            if not seq.samples:
                continue
            req.num_output_tokens += num_sampled.get(req.request_id, 1) if num_sampled else 1
            if req.num_output_tokens >= req.max_output_tokens:
                done.append(self._finish(req, "length"))
            elif req.request_id in finished:
                done.append(self._finish(req, "stop"))
        return done

    def abort(self, request_id: str) -> Request | None:
        """Stop a request wherever it is; free its blocks. None if unknown."""
        req = self.requests.get(request_id)
        if req is None:
            return None
        if req.status is RequestStatus.RUNNING:
            return self._finish(req, "abort")
        self.waiting.remove(req)
        del self.requests[request_id]
        req.status = RequestStatus.FINISHED
        req.finish_reason = "abort"
        return req

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    # ---- fast path (used by the simulator) --------------------------------------
    def decode_horizon(self, max_steps: int) -> int:
        """How many coming steps are certainly "every running request decodes 1 token".

        0 unless every running request is decoding and the policy would admit no
        waiting request now. Free KV only shrinks and the running set only
        changes at a finish, so that stays true until the first request reaches
        ``max_output_tokens`` or the KV blocks run out; the horizon stops there
        (a finish is included as the horizon's last step).
        """
        running = self.running
        if not running or max_steps < 1:
            return 0
        steps = max_steps
        for req in running:
            if req.num_output_tokens == 0 or req.num_computed_tokens != req.num_tokens - 1:
                return 0
            left = req.max_output_tokens - req.num_output_tokens
            if left < steps:
                steps = left
        if self.policy.would_admit(self):
            return 0
        return self._kv_horizon(steps)

    def advance_decode(self, num_steps: int) -> list[Request]:
        """Apply ``num_steps`` all-decode steps (at most :meth:`decode_horizon`)."""
        bs = self.config.block_size
        kv = self.kv
        done: list[Request] = []
        for req in tuple(self.running):
            computed = req.num_computed_tokens + num_steps
            need = cdiv(computed, bs) - len(req.block_table)
            if need > 0:
                blocks = kv.allocate(need)
                if blocks is None:
                    raise RuntimeError("advance_decode beyond decode_horizon: KV ran out")
                req.block_table.extend(blocks)
            req.num_computed_tokens = computed
            req.num_output_tokens += num_steps
            if req.num_output_tokens >= req.max_output_tokens:
                done.append(self._finish(req, "length"))
        return done

    def _kv_horizon(self, steps: int) -> int:
        """Largest k <= steps such that k decode steps of every running request fit in KV."""
        free = self.kv.num_free_blocks

        def need(k: int) -> int:
            bs = self.config.block_size
            return sum(
                max(0, cdiv(r.num_computed_tokens + k, bs) - len(r.block_table))
                for r in self.running
            )

        if need(steps) <= free:
            return steps
        lo, hi = 0, steps  # need(lo) fits, need(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if need(mid) <= free:
                lo = mid
            else:
                hi = mid
        return lo

    # ---- helpers for policies -----------------------------------------------------
    def allocate_for(self, req: Request, num_new: int) -> bool:
        """Grow ``req``'s block table to hold ``num_new`` more tokens; False if KV is full."""
        need = cdiv(req.num_computed_tokens + num_new, self.config.block_size) - len(
            req.block_table
        )
        if need <= 0:
            return True
        blocks = self.kv.allocate(need)
        if blocks is None:
            return False
        req.block_table.extend(blocks)
        return True

    def prefix_hits(self, req: Request) -> list[int]:
        """Cached blocks ``req`` (holding no KV yet) can reuse; always leaves >= 1 token to compute."""
        if not req.block_hashes or not self.config.enable_prefix_caching:
            return []
        return self.kv.match_prefix(
            req.block_hashes, (req.num_tokens - 1) // self.config.block_size
        )

    def admission_cost(self, req: Request, hits: list[int], num_new: int) -> int:
        """Free blocks admitting ``req`` with these hits and ``num_new`` tokens would consume."""
        bs = self.config.block_size
        # Hits sitting in the free pool leave it when shared.
        revived = sum(1 for b in hits if self.kv.ref_counts[b] == 0)
        return cdiv(len(hits) * bs + num_new, bs) - len(hits) + revived

    def admit(self, req: Request, hits: list[int], num_new: int) -> bool:
        """Move the head of ``waiting`` to running with its prefix hits and ``num_new`` tokens."""
        if self.admission_cost(req, hits, num_new) > self.kv.num_free_blocks:
            return False
        self.kv.share(hits)
        req.block_table = list(hits)
        req.num_computed_tokens = len(hits) * self.config.block_size
        if not self.allocate_for(req, num_new):  # cannot happen after the cost check
            raise RuntimeError("KV allocation failed after a successful admission check")
        if not req.admitted:
            req.admitted = True
            req.num_cached_prompt_tokens = req.num_computed_tokens
        req.num_registered_blocks = len(hits)
        self.waiting.popleft()
        req.status = RequestStatus.RUNNING
        self.running.append(req)
        return True

    def preempt(self, req: Request) -> None:
        """Preemption by recompute: drop ``req``'s KV and put it first in line."""
        self.running.remove(req)
        self.kv.free(req.block_table)
        req.block_table = []
        req.num_computed_tokens = 0
        req.num_registered_blocks = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(req)
        self.num_preemptions += 1

    # ---- internals ----------------------------------------------------------------
    def _finish(self, req: Request, reason: str) -> Request:
        self.running.remove(req)
        self.kv.free(req.block_table)
        req.block_table = []
        req.status = RequestStatus.FINISHED
        req.finish_reason = reason
        del self.requests[req.request_id]
        return req

    def _register_blocks(self, req: Request) -> None:
        full = min(len(req.block_hashes), req.num_computed_tokens // self.config.block_size)
        for i in range(req.num_registered_blocks, full):
            self.kv.register(req.block_table[i], req.block_hashes[i])
        req.num_registered_blocks = max(req.num_registered_blocks, full)

    def _reject_reason(self, req: Request) -> str | None:
        cfg = self.config
        if req.prompt_tokens < 1 or req.max_output_tokens < 1:
            return f"prompt_tokens={req.prompt_tokens}, max_output_tokens={req.max_output_tokens}: both must be >= 1"
        total = req.prompt_tokens + req.max_output_tokens
        if cfg.max_model_len is not None and total > cfg.max_model_len:
            return f"prompt + output = {total} tokens exceeds max_model_len={cfg.max_model_len}"
        blocks = cdiv(total - 1, cfg.block_size)  # the last token's KV is never written
        if blocks > cfg.num_blocks:
            return f"needs {blocks} KV blocks but the replica has {cfg.num_blocks}"
        if cfg.policy != "chunked" and req.prompt_tokens > cfg.max_num_batched_tokens:
            return (
                f"prompt of {req.prompt_tokens} tokens exceeds max_num_batched_tokens="
                f"{cfg.max_num_batched_tokens} without chunked prefill"
            )
        return None
