"""The decode group of :class:`~infercast.sched.scheduler.Scheduler` (see its module doc).

Requests that are plainly decoding advance together, one token per group step;
their counts are lazy (``Request.dbase``) and their new KV blocks are counted by
phase, so a step costs O(requests not in the group). Also the simulator's fast
path: :meth:`DecodeGroupMixin.decode_horizon` and :meth:`~DecodeGroupMixin.advance_decode`.
This mixin only makes sense inside ``Scheduler``, whose state it shares.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from infercast.sched.kv_cache import BlockManager
from infercast.sched.policies import _head_fits
from infercast.sched.request import Request, RequestStatus

if TYPE_CHECKING:
    from infercast.sched.scheduler import SchedulerConfig

_heappush = heapq.heappush
_FINISHED = RequestStatus.FINISHED  # a module constant: ~4x cheaper to read than the enum member


class DecodeGroupMixin:
    """Group bookkeeping on the scheduler's state (kv, group, explicit, dstep, ...)."""

    # The scheduler's state this mixin works on (set by ``Scheduler.__init__``).
    config: SchedulerConfig
    kv: BlockManager
    policy: Any  # a policy object of ``policies.make_policy`` (its methods take the Scheduler)
    waiting: deque[Request]
    running: dict[str, Request]
    explicit: dict[str, Request]
    group: dict[str, Request]
    requests: dict[str, Request]
    dstep: int
    _phase: list[int]
    _phased: int
    group_context: int
    _fsum: int  # these two are kept only under SGLang's rule (``ratio``), their one reader
    _fmax: int
    _finish_heap: list[tuple[int, int, Request]]
    _heap_seq: int
    _reserve: list[int]
    _pending_group: int
    _pending_blocks: int
    _plain_chunked: bool
    _head_chunked: bool | None
    _head_less_group: bool
    ratio: Any  # admission.NewTokenRatio under SGLang's admission rule, else None
    hold: Any  # admission.AdpBalance or BatchWait (TensorRT-LLM's waiting rules), else None
    prefix_hits: Callable[[Request], list[int]]  # Scheduler's
    _register_blocks: Callable[
        [Request], None
    ]  # Scheduler's: make a request's full blocks findable
    preempt: Callable[[Request], None]  # Scheduler's: drop a request's KV, put it first in line

    @property
    def group_joins(self) -> int:
        """How many times a request has joined the decode group so far (it changes exactly when
        one joins): a member's context minus the group step count is fixed while it stays, so
        between two equal counts the group lost members at most."""
        return self._heap_seq

    def sync_all(self) -> None:
        """Bring every group member's counts and block table up to date."""
        for req in self.group.values():
            self._sync(req)

    # ---- fast path (used by the simulator) --------------------------------------
    def decode_horizon(self, max_steps: int) -> int:
        """How many coming steps are certainly "the decode group and nothing else".

        0 unless every running request is in the group and the policy would
        admit no waiting request now. Free KV only shrinks and the running set
        only changes at a finish, so that stays true until the first member
        reaches ``max_output_tokens`` (included as the horizon's last step) or
        the KV blocks run out.
        """
        if not self.group or self.explicit or self._pending_group:
            return 0
        held = None
        if self.waiting:
            if self.hold is not None:  # held by a waiting rule (admission.py)
                held = self.hold.held_steps(self)
                if not held:
                    return 0
            elif self._head_chunked is not None and _head_fits(  # ``policy.would_admit(self)``
                self,  # type: ignore[arg-type]  # the mixin is only ever a Scheduler
                self.config.max_num_batched_tokens
                - (len(self.group) if self._head_less_group else 0),
                self._head_chunked,
            ):
                return 0
        heap = self._finish_heap
        # Drop stale finish-heap entries: an entry is its request's current one when the request
        # is a member (``dbase >= 0``; every way out of the group, ``_leave_group``, sets it to -1,
        # and preemption, abort and finish leave the group) with that finish step.
        finish, _, req = heap[0]
        while req.dbase < 0 or req.finish_dstep != finish:
            heapq.heappop(heap)
            finish, _, req = heap[0]
        steps = finish - self.dstep  # >= 1: members finished by now have left
        if max_steps < steps:
            if max_steps < 1:
                return 0
            steps = max_steps
        if held is not None and held < steps:
            steps = held
        if self.ratio is not None and self.waiting:
            steps = self._ratio_horizon(steps)
        if (steps // self.config.block_size + 1) * self._phased <= self.kv.num_free_blocks:
            return steps  # a bound: even a new block per member every block_size steps fits
        return self._kv_horizon(steps)

    def _ratio_horizon(self, steps: int) -> int:
        """Under SGLang's admission (``sched/admission.py``) the head of the queue may come to fit
        while the group decodes (the ratio decays, the running requests' remaining output
        shrinks): the decode steps before the first one after which it would be admitted."""
        ratio, req, bs = self.ratio, self.waiting[0], self.config.block_size
        if len(self.running) >= self.config.max_num_seqs:
            return steps  # no seat until a member finishes (the horizon's end)
        if ratio.ignore_eos:  # ``add_one_req_ignore_eos``: it did not fit now; step by step
            return 1
        hits = len(self.prefix_hits(req)) if self.config.enable_prefix_caching else 0
        need = req.prompt_tokens + req.num_output_tokens - hits * bs + ratio.output_estimate(req)
        free0 = self.kv.num_free_blocks
        clip = ratio.clip
        n = len(self.group)
        short = self._fmax - self.dstep <= clip  # then no member's remaining output is clipped
        total0 = self._fsum - n * self.dstep
        lefts = [] if short else [r.finish_dstep - self.dstep for r in self.group.values()]
        for k in range(1, steps):
            free = (free0 - self._blocks_needed(k)) * bs
            if free <= need:
                continue
            left = total0 - k * n if short else sum(x - k if x - k < clip else clip for x in lefts)
            if need < free - left * ratio.at(k):
                return k
        return steps

    def advance_decode(self, num_steps: int) -> list[Request]:
        """Apply ``num_steps`` group-only steps (at most :meth:`decode_horizon`)."""
        need = self._blocks_needed(num_steps)
        if need:
            blocks = self.kv.take(need)
            if blocks is None:
                raise RuntimeError("advance_decode beyond decode_horizon: KV ran out")
            self._reserve += blocks
        self.dstep += num_steps
        self.group_context += num_steps * len(self.group)
        if self.ratio is not None:
            self.ratio.steps += num_steps  # each a decode-only step (admission.NewTokenRatio)
        return self._pop_finished() if self._finish_heap[0][0] <= self.dstep else []

    def _blocks_needed(self, steps: int) -> int:
        """Blocks the group's next ``steps`` steps take: whole rounds, then a run of phases."""
        bs, phase = self.config.block_size, self._phase
        need = (steps // bs) * self._phased
        r = steps % bs
        if r:
            lo = self.dstep % bs
            hi = lo + r
            need += sum(phase[lo:hi]) if hi <= bs else sum(phase[lo:]) + sum(phase[: hi - bs])
        return need

    def _kv_horizon(self, steps: int) -> int:
        """Largest k <= steps whose group steps fit in the free KV blocks."""
        free, n, bs = self.kv.num_free_blocks, self._phased, self.config.block_size
        if self._blocks_needed(steps) <= free:
            return steps
        full = min(steps // bs, free // n)  # n > 0 here: otherwise nothing is needed
        left = free - full * n
        k = full * bs
        for _ in range(min(bs, steps - k)):
            left -= self._phase[(self.dstep + k) % bs]
            if left < 0:
                break
            k += 1
        return k

    # ---- decode group -------------------------------------------------------------
    def start_group_step(self) -> int:
        """Schedule the group's next step: allocate its new blocks. 0 if KV is short: the group is
        kept for :meth:`shed_group` when it can take the step's preemptions whole, else dissolved
        (per-request preemption by the policy)."""
        if not self.group:
            return 0
        need = self._phase[self.dstep % self.config.block_size]
        if need:
            blocks = self.kv.take(need)
            if blocks is None:
                if not self.can_shed:
                    self.dissolve_group()
                return 0
            self._reserve += blocks
        self._pending_group = len(self.group)
        self._pending_blocks = need
        return self._pending_group

    @property
    def can_shed(self) -> bool:
        """Whether a group short of KV blocks can preempt its newest members itself
        (:meth:`shed_group`) instead of dissolving. The per-request path it replaces lists every
        member as a one-token decode, in group order, and preempts the newest running request
        whenever one needs a block and none is free; that preempts exactly the newest members whose
        removal lets the rest's blocks fit, when every running request is a member (none explicit),
        every member fits in the token budget (else that path runs only the first ``budget``), and
        which block goes where does not matter (no prefix caching, no block tables handed out)."""
        cfg = self.config
        return (
            not self.explicit
            and len(self.group) <= cfg.max_num_batched_tokens
            and not cfg.enable_prefix_caching
            and not cfg.emit_block_tables
        )

    def shed_group(self, preempted: list[str]) -> int:
        """The group step :meth:`start_group_step` could not schedule (KV short, group kept):
        preempt the newest running requests (all members: :attr:`can_shed`) until its blocks fit,
        listing them in ``preempted``, then schedule it; its member count. The same requests are
        preempted, in the same order, as by dissolving the group and preempting per request
        (``policies._run_running``), and the survivors step together as they would have one by
        one; the group is not rebuilt (each preemption costs O(1) group bookkeeping, not
        O(members))."""
        bs, phase, kv, running = self.config.block_size, self._phase, self.kv, self.running
        while self.group and phase[self.dstep % bs] > kv.num_free_blocks:
            victim = next(reversed(running.values()))  # the newest, as ``_run_running`` picks
            self.preempt(victim)  # leaves the group, frees its blocks, first in line
            preempted.append(victim.request_id)
        return self.start_group_step()

    def end_group_step(self) -> list[Request]:
        """The scheduled group step (if any) ran: the members it finished (``update`` calls it)."""
        if not self._pending_group:
            return []
        self._pending_group = 0
        self.dstep += 1
        self.group_context += len(self.group)
        return self._pop_finished() if self._finish_heap[0][0] <= self.dstep else []

    def undo_group_step(self) -> None:
        """Take back a scheduled group step (its blocks return to the pool)."""
        if self._pending_group:
            k = self._pending_blocks
            if k:
                self.kv.give(self._reserve[-k:], 0)  # fresh blocks: none indexed
                del self._reserve[-k:]
            self._pending_group = 0

    def dissolve_group(self) -> None:
        """Every member becomes an explicit request again (for per-request preemption)."""
        self.undo_group_step()
        for req in list(self.group.values()):
            self._leave_group(req)

    def _sync(self, req: Request, lookahead: int = 0) -> None:
        d = self.dstep - req.dbase
        if d:
            req.num_computed_tokens += d
            req.num_output_tokens += d
            req.dbase = self.dstep
        bs = self.config.block_size
        need = -(-(req.num_computed_tokens + lookahead) // bs) - len(req.block_table)
        if need > 0:
            req.block_table.extend(self._reserve[-need:])
            del self._reserve[-need:]

    def _join_group(self, req: Request) -> None:
        c = req.num_computed_tokens
        if req.prompt_tokens + req.num_output_tokens - c != 1:
            return  # several tokens sampled (speculative): it catches up explicitly first
        bs = self.config.block_size
        d = self.dstep
        if len(req.block_table) == -(-c // bs):  # tight table: a new block every bs steps
            req.group_phase = phase = (d - c) % bs
            self._phase[phase] += 1
            self._phased += 1
        elif len(req.block_table) * bs >= req.prompt_tokens + req.max_output_tokens - 1:
            req.group_phase = -1  # KV reserved to the end (static policy): never needs a block
        else:
            return  # neither: stay explicit
        rid = req.request_id
        del self.explicit[rid]
        req.dbase = d
        self.group_context += c
        req.finish_dstep = f = d + req.max_output_tokens - req.num_output_tokens
        if self.ratio is not None:  # the members' remaining output: read by SGLang's rule alone
            self._fsum += f
            if f > self._fmax:
                self._fmax = f
        self._heap_seq += 1
        _heappush(self._finish_heap, (f, self._heap_seq, req))
        self.group[rid] = req

    def _leave_group(self, req: Request, explicit: bool = True) -> None:
        """Back to an explicit request (``explicit=False``: it finishes at once, list it
        nowhere)."""
        self._sync(req)
        if req.group_phase >= 0:
            self._phase[req.group_phase] -= 1
            self._phased -= 1
        self.group_context -= req.num_computed_tokens  # synced: counted to this step
        if self.ratio is not None:
            self._fsum -= req.finish_dstep
        del self.group[req.request_id]
        req.dbase = -1
        if explicit:
            self.explicit[req.request_id] = req

    def _pop_finished(self) -> list[Request]:
        """Finish every live member whose ``finish_dstep`` has come, in (finish step, join) order.

        Each is ``_leave_group(req, explicit=False)`` then ``Scheduler._finish(req, "length",
        explicit=False)``, fused: the same changes in the same order (see docs/performance.md).
        """
        heap, dstep, pop = self._finish_heap, self.dstep, heapq.heappop
        bs, phases = self.config.block_size, self._phase
        group, running, requests = self.group, self.running, self.requests
        kv, reserve = self.kv, self._reserve
        caching = self.config.enable_prefix_caching
        counts_left = self.ratio is not None  # ``_fsum``: kept for SGLang's rule alone
        done: list[Request] = []
        while heap and heap[0][0] <= dstep:
            f, _, req = pop(heap)
            if req.dbase < 0 or req.finish_dstep != f:  # stale (see decode_horizon)
                continue
            d = dstep - req.dbase  # ``_sync``
            req.num_computed_tokens = c = req.num_computed_tokens + d
            req.num_output_tokens += d
            table = req.block_table
            need = -(-c // bs) - len(table)  # its blocks still in the reserve
            if need > 0:
                table += reserve[-need:]
                del reserve[-need:]
            phase = req.group_phase
            if phase >= 0:
                phases[phase] -= 1
                self._phased -= 1
            self.group_context -= c
            if counts_left:
                self._fsum -= f
            rid = req.request_id
            del group[rid]
            req.dbase = -1
            del running[rid]  # ``_finish``
            if caching and req.block_hashes:  # as ``_finish``: the decoded blocks stay findable
                self._register_blocks(req)
            kv.give(table, len(req.block_hashes))
            req.block_table = []
            req.status = _FINISHED
            req.finish_reason = "length"
            del requests[rid]
            done.append(req)
        return done
