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
  ``num_sampled[request_id]`` = tokens sampled this step, a count or the token
  ids themselves (default 1 for every
  sequence whose ``samples`` is True); ``finished`` = ids that hit a stop
  condition (EOS). A request also finishes at ``max_output_tokens``. Returns the
  requests finished by this step; their blocks are already freed.
- ``abort(request_id)``: remove it wherever it is and free its blocks.
- Fast path (simulator): ``decode_horizon(max_steps)`` says how many coming
  steps are certainly the same all-decode batch, ``advance_decode(k)`` applies
  k of them at once. Running them one by one gives the same state.

The decode group (why a step costs O(new requests), not O(batch)): under the
continuous and chunked policies every running request that is plainly decoding
joins a *group* that advances together, one token per group step. Its members'
counts are kept lazily (``Request.dbase``: the group step count at their last
sync) and their new KV blocks are counted by *phase*: a member writing position
p needs a new block exactly when p % block_size == 0, so the blocks a group
step needs are ``phase[dstep % block_size]``, allocated from the pool at once
into a reserve and handed to tables when a member is synced (when it leaves,
finishes, is preempted, or is listed in a batch). So the KV pool, the budget
and every decision are the same as with per-request bookkeeping; the engine
(``compact_decodes=False``) gets every member listed and synced each step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from infercast.errors import ConfigError
from infercast.sched.admission import AdpBalance, BatchWait, NewTokenRatio
from infercast.sched.batch import Batch, ScheduledSeq
from infercast.sched.decode_group import DecodeGroupMixin
from infercast.sched.host_tier import HostTier
from infercast.sched.kv_cache import BlockManager, cdiv
from infercast.sched.policies import make_policy
from infercast.sched.request import Request, RequestStatus

# Enum members read through the class cost ~60 ns each (EnumType lookup); module constants ~15.
_RUNNING = RequestStatus.RUNNING
_FINISHED = RequestStatus.FINISHED
_WAITING = RequestStatus.WAITING

POLICY_NAMES = ("static", "continuous", "chunked", "prefill-first")
ADMISSION_RULES = (
    "current-use",
    "reserve-full-output",
    "sglang-new-token-ratio",
    "sglang-ignore-eos",
)
RATIO_RULES = ("sglang-new-token-ratio", "sglang-ignore-eos")  # SGLang's, with NewTokenRatio
CHUNKING = (
    "chunked",
    "prefill-first",
)  # policies that split a prompt over steps (no prompt-length cap)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Limits of one replica's scheduler (validated on construction).

    ``max_num_batched_tokens`` is the token budget of one step (vLLM's name);
    ``static`` and ``continuous`` reject prompts longer than it, as vLLM v0 does.
    ``emit_block_tables=False`` leaves ``ScheduledSeq.block_table`` empty and
    ``compact_decodes=True`` reports the decode group as two numbers in the
    :class:`Batch` instead of one entry per request (the simulator needs
    neither tables nor per-request decode entries; building them costs time).
    """

    policy: str = "chunked"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    num_blocks: int = 4096
    enable_prefix_caching: bool = False
    max_model_len: int | None = None
    emit_block_tables: bool = True
    compact_decodes: bool = False
    host_blocks: int = 0  # a host-memory KV tier of this many blocks (sched/host_tier.py); 0 = none
    # which waiting request may start (sched/admission.py): by the KV free now, with KV for the
    # whole sequence reserved up front, or against SGLang's estimate of the running requests'
    # remaining output (its parameters below; unused by the other rules), or SGLang's rule for
    # ``ignore_eos`` requests without a radix cache (``sglang-ignore-eos``, the same parameters)
    admission: str = "current-use"
    new_token_ratio_init: float = 0.7
    new_token_ratio_min_factor: float = 0.14
    new_token_ratio_decay_steps: float = 600.0
    clip_max_new_tokens: int = 4096
    retract_decode_steps: int = 20
    # TensorRT-LLM's attention-DP context balance (sched/admission.py, ``AdpBalance``): over this
    # many attention-DP ranks (1 = off), new requests wait until every rank has one, at most
    # ``adp_timeout_iters`` iterations; ``adp_batching_wait_iters`` more once every rank has one
    adp_ranks: int = 1
    adp_timeout_iters: int = 1
    adp_batching_wait_iters: int = 0
    # SGLang's ``--max-prefill-tokens`` (0 = no such cap): within one step, a waiting request
    # after the step's first prompt starts only while its prompt is below what is left of this
    # many tokens (sched/policies.py ``admit_waiting``)
    max_prefill_tokens: int = 0
    # TensorRT-LLM's batch waiting (sched/admission.py ``BatchWait``; 0 = off): new requests wait
    # until their prompts and the decodes fill this share of the token budget, at most this many
    # iterations (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``)
    batch_wait_timeout_iters: int = 0
    batch_wait_max_tokens_ratio: float = 0.0

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
                f"max_num_batched_tokens={self.max_num_batched_tokens} < "
                f"max_num_seqs={self.max_num_seqs}: raise max_num_batched_tokens or lower "
                "max_num_seqs"
            )
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ConfigError(f"max_model_len={self.max_model_len}: must be at least 2 tokens")
        if self.admission not in ADMISSION_RULES:
            raise ConfigError(
                f"`admission` {self.admission!r}: choose one of {', '.join(ADMISSION_RULES)}"
            )
        if not 0 < self.new_token_ratio_init <= 1 or not 0 <= self.new_token_ratio_min_factor <= 1:
            raise ConfigError(
                "`new_token_ratio_init` must be in (0, 1] and `new_token_ratio_min_factor` in "
                f"[0, 1] (got {self.new_token_ratio_init}, {self.new_token_ratio_min_factor})"
            )
        if self.new_token_ratio_decay_steps <= 0 or self.clip_max_new_tokens < 1:
            raise ConfigError(
                "`new_token_ratio_decay_steps` and `clip_max_new_tokens` must be positive"
            )
        if self.max_prefill_tokens < 0:
            raise ConfigError(f"`max_prefill_tokens` {self.max_prefill_tokens}: must be >= 0")
        if self.batch_wait_timeout_iters < 0 or not 0 <= self.batch_wait_max_tokens_ratio <= 1:
            raise ConfigError(
                "`batch_wait_timeout_iters` must be >= 0 and `batch_wait_max_tokens_ratio` in "
                f"[0, 1] (got {self.batch_wait_timeout_iters}, {self.batch_wait_max_tokens_ratio})"
            )
        if self.batch_wait_timeout_iters and self.adp_ranks > 1:
            # PyExecutor._schedule waits for a batch only without attention DP
            raise ConfigError("`batch_wait_timeout_iters` applies only when `adp_ranks` is 1")
        if self.adp_ranks < 1 or self.adp_timeout_iters < 1 or self.adp_batching_wait_iters < 0:
            raise ConfigError(
                "`adp_ranks` and `adp_timeout_iters` must be >= 1 and `adp_batching_wait_iters` "
                f">= 0 (got {self.adp_ranks}, {self.adp_timeout_iters}, "
                f"{self.adp_batching_wait_iters})"
            )


class Scheduler(DecodeGroupMixin):
    """Request queues, the KV block manager and a batching policy (see module doc)."""

    # Slots: each attribute read on the step's path is a slot load, not a dict lookup (the
    # mixin has none, so an instance still has a dict, unused).
    __slots__ = (
        "config",
        "kv",
        "policy",
        "waiting",
        "running",
        "explicit",
        "group",
        "requests",
        "num_preemptions",
        "dstep",
        "_phase",
        "_phased",
        "group_context",
        "_finish_heap",
        "_heap_seq",
        "_reserve",
        "_pending_group",
        "_pending_blocks",
        "_max_total",
        "_max_prompt",
        "_plain_chunked",
        "_plain_batch",
        "_plain_seqs",
        "_head_chunked",
        "_head_less_group",
        "_fsum",
        "_fmax",
        "reserve_full",
        "ratio",
        "hold",
    )

    def __init__(self, config: SchedulerConfig):
        self.config = config
        tier = HostTier(config.host_blocks) if config.host_blocks else None
        self.kv = BlockManager(
            config.num_blocks, config.block_size, config.enable_prefix_caching, tier
        )
        self.policy = make_policy(config.policy)
        # ``policy.would_admit`` while only the group runs, as ``_head_fits`` arguments (None:
        # never), for ``decode_horizon`` (policies.py ``group_head``)
        head = self.policy.group_head
        self._head_chunked = None if head is None else head[0]
        self._head_less_group = head is not None and head[1]
        self.waiting: deque[Request] = deque()
        # Admission order (the last is preempted first); a dict: a finish removes in O(1).
        self.running: dict[str, Request] = {}
        self.explicit: dict[str, Request] = {}  # running requests outside the decode group
        self.group: dict[str, Request] = {}  # the decode group (see module doc)
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0
        self.dstep = 0  # group steps run so far
        self._phase = [0] * config.block_size  # members needing a block when dstep % bs == i
        self._phased = 0  # members with a phase (sum of _phase)
        # Sum of the members' contexts (cached tokens) now: a counter kept by every join, leave
        # and group step (as ``BlockManager.num_free_blocks``), read once per simulated step.
        self.group_context = 0
        # Sum over members of finish_dstep (their remaining output) and a bound of it: kept only
        # under SGLang's admission rule, which alone reads them (admission.py)
        self._fsum = 0
        self._fmax = 0
        self._finish_heap: list[tuple[int, int, Request]] = []
        self._heap_seq = 0
        self._reserve: list[int] = []  # blocks allocated for members, not yet in their tables
        self._pending_group = 0  # members in the scheduled, not yet updated, group step
        self._pending_blocks = 0
        # ``_reject_reason`` is None when 1 <= prompt <= _max_prompt, 1 <= output and
        # prompt + output <= _max_total (KV: cdiv(total - 1, block_size) <= num_blocks).
        kv_total = config.num_blocks * config.block_size + 1
        self._max_total = (
            kv_total if config.max_model_len is None else min(kv_total, config.max_model_len)
        )
        self._max_prompt = (
            config.max_num_batched_tokens if config.policy not in CHUNKING else kv_total
        )
        # admission rule (sched/admission.py): KV for the whole sequence taken at admission, or
        # SGLang's new-token-ratio estimate (its state: ``ratio``)
        self.reserve_full = config.admission == "reserve-full-output"
        self.ratio = NewTokenRatio(config) if config.admission in RATIO_RULES else None
        # a rule that holds every waiting request for some iterations (sched/admission.py)
        self.hold: AdpBalance | BatchWait | None = (
            AdpBalance(config)
            if config.adp_ranks > 1
            else BatchWait(config)
            if config.batch_wait_timeout_iters
            else None
        )
        self._plain_chunked = (
            config.policy == "chunked"
            and config.compact_decodes
            and not config.emit_block_tables
            and self.ratio is None  # the ratio rule runs on the general path
            and not config.max_prefill_tokens  # so does SGLang's input cap (``admit_waiting``)
        )
        self._plain_batch = Batch()  # refilled by every ``_schedule_plain_chunked`` (see there)
        self._plain_seqs: list[ScheduledSeq] = []  # its seqs, refilled too

    # ---- public API -------------------------------------------------------------
    def add_request(self, req: Request) -> bool:
        """Queue a request, or reject it (False) when it could never run."""
        p, o = req.prompt_tokens, req.max_output_tokens
        if not (1 <= p <= self._max_prompt and o >= 1 and p + o <= self._max_total):
            reason = self._reject_reason(req)  # else it fits: the usual case, cheaply
            if reason is not None:
                req.status = RequestStatus.REJECTED
                req.finish_reason = "rejected"
                req.reject_reason = reason
                return False
        if req.request_id in self.requests:
            raise ValueError(f"duplicate request id {req.request_id!r}")
        if self.ratio is not None and not self.requests:
            self.ratio.reset()  # the engine was idle: SGLang re-inits the ratio (admission.py)
        req.status = _WAITING
        self.requests[req.request_id] = req
        self.waiting.append(req)
        return True

    def schedule(self) -> Batch:
        """The next step's batch (empty when nothing can run).

        With the simulator's settings (chunked, compact decodes, no block tables) the usual step's
        batch and its seqs are objects refilled by each call: use them before the next.
        """
        if self.hold is not None and self.hold.holds(self):  # no new request starts in this step
            return self._schedule_holding()
        if self._plain_chunked and not self.explicit:
            batch = self._schedule_plain_chunked()
            if batch is not None:
                return batch
        entries, preempted = self.policy.schedule(self)
        if self.ratio is not None:
            self.ratio.after_schedule(self, entries, preempted)
        cfg = self.config
        n_group = self._pending_group
        if n_group and not cfg.compact_decodes:
            listed = []
            for req in self.group.values():
                self._sync(req, lookahead=1)  # the table must hold the position written now
                listed.append((req, 1))
            entries = listed + entries
            n_group = 0
        if cfg.emit_block_tables:
            seqs = tuple(
                [
                    ScheduledSeq(
                        req.request_id,
                        n,
                        req.num_computed_tokens,
                        tuple(req.block_table),
                        req.num_computed_tokens + n == req.num_tokens,
                        req,
                    )
                    for req, n in entries
                ]
            )
        elif len(entries) == 1:  # the common simulator step: one prefill chunk beside the group
            req, n = entries[0]
            c = req.num_computed_tokens
            seqs = (
                ScheduledSeq(
                    req.request_id,
                    n,
                    c,
                    (),
                    c + n == req.prompt_tokens + req.num_output_tokens,
                    req,
                ),
            )
        else:
            seqs = tuple(
                [
                    ScheduledSeq(
                        req.request_id,
                        n,
                        req.num_computed_tokens,
                        (),
                        req.num_computed_tokens + n == req.prompt_tokens + req.num_output_tokens,
                        req,
                    )
                    for req, n in entries
                ]
            )
        cached = self.group_context if n_group else 0
        return Batch(seqs, tuple(preempted) if preempted else (), n_group, cached)

    def _schedule_holding(self) -> Batch:
        """``schedule`` with the waiting requests held back (``hold``): the running ones
        only; a request the step preempts goes first in line, as it would have."""
        held, self.waiting = self.waiting, deque()
        try:
            return self.schedule()  # nothing waits, so the balance holds nothing more
        finally:
            held.extendleft(reversed(self.waiting))
            self.waiting = held

    def _schedule_plain_chunked(self) -> Batch | None:
        """``schedule()`` of the chunked policy when no request is outside the decode group, with
        compact decodes and no block tables (the simulator's usual step): the group step, then FCFS
        prefill chunks of waiting requests in what is left of the budget, as
        ``ChunkedPolicy.schedule`` decides them, into one Batch whose ScheduledSeqs are refilled
        too by every call (valid until the next ``schedule()``; the simulator's replica runs each
        batch before it schedules the next; a ScheduledSeq's construction is a Python call, about
        1 % of a fast-mode simulation's instructions). None when the group could not get its KV
        blocks and dissolved: then the general path runs (preemption).
        """
        n_group = len(self.group)
        if n_group and not self.start_group_step():
            return None
        cfg = self.config
        bs, caching = cfg.block_size, cfg.enable_prefix_caching
        budget = cfg.max_num_batched_tokens - n_group
        waiting, running, max_seqs = self.waiting, self.running, cfg.max_num_seqs
        reserve_full = self.reserve_full  # else ``admission_tokens`` is the chunk itself
        seqs: list[ScheduledSeq] = []
        pool = self._plain_seqs
        while waiting and budget > 0 and len(running) < max_seqs:  # ``admit_waiting``, fused
            req = waiting[0]
            total = req.prompt_tokens + req.num_output_tokens
            if caching and req.block_hashes:  # else no hits: fresh blocks only
                hits = self.prefix_hits(req)
                n = min(total - len(hits) * bs, budget)
                if not self.admit(req, hits, n):
                    break
            else:  # ``admit(req, [], n)``: fresh blocks only
                n = total if total < budget else budget
                need = self.admission_tokens(req, 0, n) if reserve_full else n
                blocks = self.kv.take(-(-need // bs))
                if blocks is None:
                    break
                req.block_table = blocks
                req.num_computed_tokens = 0
                if not req.admitted:
                    req.admitted = True
                    req.num_cached_prompt_tokens = 0
                req.num_registered_blocks = 0
                waiting.popleft()
                req.status = _RUNNING
                running[req.request_id] = self.explicit[req.request_id] = req
            c = req.num_computed_tokens
            try:
                seq = pool[len(seqs)]
            except IndexError:  # the pool grows to the most seqs a batch has held
                seq = ScheduledSeq("", 0, 0)
                pool.append(seq)
            seq.request_id, seq.num_new_tokens, seq.num_cached_tokens = req.request_id, n, c
            seq.samples, seq.req = c + n == total, req
            seqs.append(seq)
            budget -= n
        batch = self._plain_batch  # refilled, not built: a construction costs ~5x these stores
        batch.seqs = tuple(seqs)
        batch.num_decode_seqs = n_group
        batch.decode_cached_tokens = self.group_context if n_group else 0
        return batch

    def update(
        self,
        batch: Batch,
        num_sampled: Mapping[str, int | Sequence[int]] | None = None,
        finished: Collection[str] = (),
    ) -> list[Request]:
        """Apply a step's result; return the requests it finished (blocks freed)."""
        done = self.end_group_step()
        prefix_caching = self.config.enable_prefix_caching
        running = _RUNNING
        for seq in batch.seqs:
            req = seq.req
            if req is None:  # a batch built by hand
                req = self.requests.get(seq.request_id)
                if req is None:
                    continue
            if req.status is not running:
                continue  # finished above, or aborted while the step ran
            if req.dbase >= 0:  # a listed group member: its token is already counted
                extra = _count(num_sampled.get(req.request_id, 1)) - 1 if num_sampled else 0
                if extra or req.request_id in finished:
                    self._leave_group(req)
                    self._sampled(req, extra, finished, done)
                continue
            req.num_computed_tokens += seq.num_new_tokens
            if prefix_caching and req.block_hashes:
                self._register_blocks(req)
            if seq.samples:
                n = _count(num_sampled.get(req.request_id, 1)) if num_sampled else 1
                if not self._sampled(req, n, finished, done):
                    self._join_group(req)
        return done

    def abort(self, request_id: str) -> Request | None:
        """Stop a request wherever it is; free its blocks. None if unknown."""
        req = self.requests.get(request_id)
        if req is None:
            return None
        if req.status is RequestStatus.RUNNING:
            if req.dbase >= 0:
                self._leave_group(req)
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

    def check_invariants(self) -> None:
        """Raise AssertionError if tables, reserve and ref counts disagree (for tests)."""
        self.sync_all()
        pending = self._pending_blocks if self._pending_group else 0
        assert len(self._reserve) <= pending, "reserve holds more than the pending step's blocks"
        refs = [0] * self.config.num_blocks
        for b in self._reserve:
            refs[b] += 1
        bs = self.config.block_size
        for req in self.running.values():
            assert len(req.block_table) * bs >= req.num_computed_tokens
            for b in req.block_table:
                refs[b] += 1
        for req in self.waiting:
            assert not req.block_table and req.num_computed_tokens == 0
        assert refs == self.kv.ref_counts, "block tables and ref counts disagree"
        assert len(self.group) + len(self.explicit) == len(self.running)
        if self.ratio is not None:  # kept for its rule alone
            assert self._fsum == sum(r.finish_dstep for r in self.group.values())
            assert all(r.finish_dstep <= self._fmax for r in self.group.values())
        assert self.group_context == sum(r.num_computed_tokens for r in self.group.values())
        assert (
            sum(self._phase)
            == self._phased
            == sum(1 for r in self.group.values() if r.group_phase >= 0)
        )
        self.kv.check_invariants()

    # ---- helpers for policies -----------------------------------------------------
    def allocate_for(self, req: Request, num_new: int) -> bool:
        """Grow ``req``'s block table to hold ``num_new`` more tokens; False if KV is full."""
        bs = self.config.block_size
        need = cdiv(req.num_computed_tokens + num_new, bs) - len(req.block_table)
        if need <= 0:
            return True
        blocks = self.kv.take(need)
        if blocks is None:
            return False
        req.block_table.extend(blocks)
        return True

    def prefix_hits(self, req: Request) -> list[int]:
        """Cached blocks ``req`` (holding no KV yet) can reuse; always leaves >= 1 token to
        compute."""
        if not req.block_hashes or not self.config.enable_prefix_caching:
            return []
        max_blocks = (req.num_tokens - 1) // self.config.block_size
        return self.kv.match_prefix(req.block_hashes, max_blocks)

    def admission_tokens(self, req: Request, num_hits: int, num_new: int) -> int:
        """Tokens of KV admitting ``req`` (with ``num_hits`` prefix-cache blocks) takes beyond its
        hits: ``num_new``, or under ``reserve-full-output`` its whole sequence (admission.py)."""
        if not self.reserve_full:
            return num_new
        whole = req.prompt_tokens + req.max_output_tokens - 1 - num_hits * self.config.block_size
        return whole if whole > num_new else num_new

    def admission_cost(self, req: Request, hits: list[int], num_new: int) -> int:
        """Free blocks admitting ``req`` with these hits and ``num_new`` tokens would consume."""
        bs = self.config.block_size
        if self.reserve_full:
            num_new = self.admission_tokens(req, len(hits), num_new)
        if not hits:
            return cdiv(num_new, bs)
        revived = self.kv.num_cached_free(hits)  # hits in the free pool leave it when shared
        return cdiv(len(hits) * bs + num_new, bs) - len(hits) + revived

    def admit(self, req: Request, hits: list[int], num_new: int) -> bool:
        """Move the head of ``waiting`` to running with its prefix hits and ``num_new`` tokens."""
        if self.reserve_full:
            num_new = self.admission_tokens(req, len(hits), num_new)
        if not hits:  # the common case: fresh blocks only
            blocks = self.kv.take(-(-num_new // self.config.block_size))
            if blocks is None:
                return False
            req.block_table = blocks
            req.num_computed_tokens = 0
        else:
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
        req.status = _RUNNING
        self.running[req.request_id] = req
        self.explicit[req.request_id] = req
        return True

    def preempt(self, req: Request) -> None:
        """Preemption by recompute: drop ``req``'s KV and put it first in line."""
        if req.dbase >= 0:
            self._leave_group(req)
        del self.running[req.request_id]
        del self.explicit[req.request_id]
        self.kv.give(req.block_table, len(req.block_hashes))
        req.block_table = []
        req.num_computed_tokens = 0
        req.num_registered_blocks = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(req)
        self.num_preemptions += 1

    # ---- internals ----------------------------------------------------------------
    def _sampled(
        self, req: Request, n: int, finished: Collection[str], done: list[Request]
    ) -> bool:
        """Count ``n`` sampled tokens; finish on max tokens or a stop. True if it finished."""
        req.num_output_tokens += n
        if req.num_output_tokens >= req.max_output_tokens:
            done.append(self._finish(req, "length"))
            return True
        if req.request_id in finished:
            done.append(self._finish(req, "stop"))
            return True
        return False

    def _finish(self, req: Request, reason: str, explicit: bool = True) -> Request:
        del self.running[req.request_id]
        if explicit:
            del self.explicit[req.request_id]
        if self.config.enable_prefix_caching and req.block_hashes:
            self._register_blocks(req)  # decoded blocks too: a chat's next turn reuses them
        self.kv.give(req.block_table, len(req.block_hashes))
        req.block_table = []
        req.status = _FINISHED
        req.finish_reason = reason
        del self.requests[req.request_id]
        return req

    def _register_blocks(self, req: Request) -> None:
        full = min(len(req.block_hashes), req.num_computed_tokens // self.config.block_size)
        for i in range(req.num_registered_blocks, full):
            self.kv.register(req.block_table[i], req.block_hashes[i])
        req.num_registered_blocks = max(req.num_registered_blocks, full)

    def _reject_reason(self, req: Request) -> str | None:
        # The rule comes first and this request's numbers last, in parentheses: summaries
        # count rejections per rule (see metrics.summary.reason_key), the engine shows it all.
        cfg = self.config
        if req.prompt_tokens < 1 or req.max_output_tokens < 1:
            return (
                "prompt_tokens and max_output_tokens must both be >= 1 "
                f"(prompt_tokens={req.prompt_tokens}, max_output_tokens={req.max_output_tokens})"
            )
        total = req.prompt_tokens + req.max_output_tokens
        if cfg.max_model_len is not None and total > cfg.max_model_len:
            return f"prompt + output exceeds max_model_len={cfg.max_model_len} ({total} tokens)"
        blocks = cdiv(total - 1, cfg.block_size)  # the last token's KV is never written
        if blocks > cfg.num_blocks:
            return f"needs more KV blocks than the replica has ({blocks} > {cfg.num_blocks})"
        if cfg.policy not in CHUNKING and req.prompt_tokens > cfg.max_num_batched_tokens:
            return (
                f"prompt exceeds max_num_batched_tokens={cfg.max_num_batched_tokens} without "
                f"chunked prefill ({req.prompt_tokens} tokens)"
            )
        return None


def _count(sampled: int | Sequence[int]) -> int:
    """Tokens sampled: a count, or the sampled token ids."""
    return sampled if isinstance(sampled, int) else len(sampled)
