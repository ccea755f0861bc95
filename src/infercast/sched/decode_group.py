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
from typing import TYPE_CHECKING, Any

from infercast.sched.kv_cache import cdiv
from infercast.sched.request import Request, RequestStatus

if TYPE_CHECKING:
    from infercast.sched.kv_cache import BlockManager

# Enum members read through the class cost ~60 ns each (EnumType lookup); module constants ~15.
_FINISHED = RequestStatus.FINISHED
_heappush = heapq.heappush


class DecodeGroupMixin:
    """Group bookkeeping on the scheduler's state (kv, group, explicit, dstep, ...)."""

    # The scheduler's state this mixin reads and writes (set in ``Scheduler.__init__``).
    config: Any  # SchedulerConfig
    kv: BlockManager
    policy: Any
    waiting: deque[Request]
    running: dict[str, Request]
    explicit: dict[str, Request]
    group: dict[str, Request]
    requests: dict[str, Request]
    dstep: int
    _phase: list[int]
    _phased: int
    _dsum: int
    _finish_heap: list[tuple[int, int, Request]]
    _heap_seq: int
    _reserve: list[int]
    _plain_chunked: bool

    @property
    def group_context_tokens(self) -> int:
        """Sum of the cached contexts of the decode group's members now."""
        return self._dsum + len(self.group) * self.dstep

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
        if not self.group or self.explicit or max_steps < 1 or self._pending_group:
            return 0
        waiting, kv = self.waiting, self.kv
        if waiting:
            if self._plain_chunked:  # ``ChunkedPolicy.would_admit`` without explicit requests or prefix caching
                cfg = self.config
                budget = cfg.max_num_batched_tokens - len(self.group)
                if budget > 0 and len(self.running) < cfg.max_num_seqs:
                    req = waiting[0]
                    n = min(req.prompt_tokens + req.num_output_tokens, budget)
                    if -(-n // cfg.block_size) <= kv.num_free_blocks:
                        return 0
            elif self.policy.would_admit(self):
                return 0
        heap = self._finish_heap
        while heap:  # drop stale entries (``_live``, inlined; ``dbase >= 0`` implies running, see there)
            f, _, req = heap[0]
            if req.dbase >= 0 and req.finish_dstep == f:
                break
            heapq.heappop(heap)
        steps = heap[0][0] - self.dstep  # ``min(max_steps, ...)`` without the call
        if steps > max_steps:
            steps = max_steps
        if (steps // self.config.block_size + 1) * self._phased <= kv.num_free_blocks:
            return steps  # the first bound of ``_kv_horizon``, without the call
        return self._kv_horizon(steps)

    def advance_decode(self, num_steps: int) -> list[Request]:
        """Apply ``num_steps`` group-only steps (at most :meth:`decode_horizon`)."""
        bs, phase = self.config.block_size, self._phase  # ``_blocks_needed(num_steps)``, inlined
        need = (num_steps // bs) * self._phased
        r = num_steps % bs
        if r:
            lo = self.dstep % bs
            hi = lo + r
            need += sum(phase[lo:hi]) if hi <= bs else sum(phase[lo:]) + sum(phase[: hi - bs])
        if need:
            kv = self.kv
            stack = kv.plain_stack
            if stack is not None and need <= len(stack):  # ``kv.allocate(need)``, inlined
                k = len(stack) - need
                self._reserve += stack[k:]
                del stack[k:]
                kv.num_free_blocks -= need
            else:
                blocks = kv.allocate(need)
                if blocks is None:
                    raise RuntimeError("advance_decode beyond decode_horizon: KV ran out")
                self._reserve.extend(blocks)
        self.dstep += num_steps
        done: list[Request] = []
        heap = self._finish_heap
        if heap and heap[0][0] <= self.dstep:
            self._pop_finished(done)
        return done

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
        if (steps // bs + 1) * n <= free or self._blocks_needed(steps) <= free:  # a bound first: no loop
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
        """Schedule the group's next step: allocate its new blocks. 0 (group dissolved) if KV is short."""
        if not self.group:
            return 0
        need = self._phase[self.dstep % self.config.block_size]
        if need:
            kv = self.kv
            stack = kv.plain_stack
            if stack is not None and need <= len(stack):  # ``kv.allocate(need)``, inlined
                k = len(stack) - need
                self._reserve += stack[k:]
                del stack[k:]
                kv.num_free_blocks -= need
            else:
                blocks = kv.allocate(need)
                if blocks is None:
                    self.dissolve_group()
                    return 0
                self._reserve.extend(blocks)
        self._pending_group = len(self.group)
        self._pending_blocks = need
        return self._pending_group

    def end_group_step(self) -> list[Request]:
        """``update()`` of a batch that is the scheduled group step alone: the requests it finished
        (``Scheduler.update`` inlines this body on its hot path)."""
        done: list[Request] = []
        if self._pending_group:
            self._pending_group = 0
            self.dstep += 1
            heap = self._finish_heap
            if heap and heap[0][0] <= self.dstep:
                self._pop_finished(done)
        return done

    def undo_group_step(self) -> None:
        """Take back a scheduled group step (its blocks return to the pool)."""
        if self._pending_group:
            k = self._pending_blocks
            if k:
                self.kv.free(self._reserve[-k:])
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
        need = cdiv(req.num_computed_tokens + lookahead, bs) - len(req.block_table)
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
        self._dsum += c - d
        req.finish_dstep = f = d + req.max_output_tokens - req.num_output_tokens
        self._heap_seq += 1
        _heappush(self._finish_heap, (f, self._heap_seq, req))
        self.group[rid] = req

    def _leave_group(self, req: Request, explicit: bool = True) -> None:
        """Back to an explicit request (``explicit=False``: it finishes at once, list it nowhere)."""
        self._sync(req)
        if req.group_phase >= 0:
            self._phase[req.group_phase] -= 1
            self._phased -= 1
        self._dsum -= req.num_computed_tokens - req.dbase
        del self.group[req.request_id]
        req.dbase = -1
        if explicit:
            self.explicit[req.request_id] = req

    def _live(self, entry: tuple[int, int, Request]) -> bool:
        """The entry is its request's current one. ``dbase >= 0`` (a group member) implies running:
        every way out of the group (``_leave_group``, ``_pop_finished``) sets ``dbase = -1`` first,
        and preemption, abort and finish leave the group; the hot copies of this test rely on it."""
        req = entry[2]
        return (
            req.dbase >= 0 and req.finish_dstep == entry[0] and req.status is RequestStatus.RUNNING
        )

    def _pop_finished(self, done: list[Request]) -> None:
        """Finish every live member whose ``finish_dstep`` has come, in (finish step, join) order.

        Each is ``_leave_group(req, explicit=False)`` then ``_finish(req, "length", explicit=False)``,
        fused (the same changes in the same order; one per finished request, so calls count).
        """
        heap, dstep, pop = self._finish_heap, self.dstep, heapq.heappop
        bs, phases = self.config.block_size, self._phase
        group, runs, requests, kv, reserve = self.group, self.running, self.requests, self.kv, self._reserve
        stack = kv.plain_stack
        while heap and heap[0][0] <= dstep:
            f, _, req = pop(heap)
            if req.dbase < 0 or req.finish_dstep != f:  # not ``_live`` (a member is running: see there)
                continue
            c = req.num_computed_tokens + dstep - req.dbase  # ``_sync`` (its ``dbase = dstep`` is overwritten below)
            req.num_computed_tokens = c
            req.num_output_tokens += dstep - req.dbase
            table = req.block_table
            need = -(-c // bs) - len(table)  # its blocks still in the reserve
            if req.group_phase >= 0:
                phases[req.group_phase] -= 1
                self._phased -= 1
            self._dsum -= c - dstep
            rid = req.request_id
            del group[rid]
            req.dbase = -1
            del runs[rid]
            if stack is not None:  # the table synced and freed (``kv.free(table)``), inlined
                stack += table  # no prefix caching: the order on the stack does not matter (see ``free``)
                kv.num_free_blocks += len(table)
                if need > 0:  # and its blocks from the reserve, as the table's tail would have been
                    stack += reserve[-need:]
                    del reserve[-need:]
                    kv.num_free_blocks += need
            else:
                if need > 0:
                    table.extend(reserve[-need:])
                    del reserve[-need:]
                self._register_blocks(req)  # as ``_finish``: the decoded blocks stay findable
                kv.free(table)
            req.block_table = []
            req.status = _FINISHED
            req.finish_reason = "length"
            del requests[rid]
            done.append(req)
