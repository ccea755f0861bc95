"""Batching policies: each a small named object deciding who runs this step.

A policy's ``schedule(s)`` returns ``(entries, preempted_ids)`` where each entry
is ``(request, num_new_tokens)``; it uses the scheduler's helpers to allocate KV,
admit and preempt. ``would_admit(s)`` answers, without side effects, whether
``schedule`` would start a waiting request now (the fast path needs it).

- ``static``: a batch is admitted only when the previous one has fully
  finished; its KV is reserved up front for prompt + max output (as servers
  without paged KV do), so it never preempts. Prefill of the whole batch, then
  decode steps until every member is done.
- ``continuous``: iteration-level batching, vLLM v0 default: if waiting
  requests fit, the step is a prefill-only step of whole prompts (no chunking);
  otherwise every running request decodes one token. KV full -> the most
  recently admitted request is preempted (recompute).
- ``chunked``: vLLM v1 / Sarathi-Serve: one token budget per step; running
  decodes first, then unfinished prefill chunks, then new requests' prefill
  chunks (FCFS) with what is left of the budget.
- ``prefill-first``: SGLang's default scheduler: a step is a prefill batch
  whenever one can be formed (the unfinished chunked prompt first, then waiting
  prompts FCFS, each chunked to what is left of the budget), and the running
  requests decode only in steps where no prefill can start. SGLang's
  ``Scheduler.get_next_batch_to_run`` returns ``get_new_batch_prefill()`` when it
  is not None and the running (decode) batch otherwise; its ``PrefillAdder``
  charges each prompt (or chunk) to ``chunked_prefill_size``
  (``python/sglang/srt/managers/scheduler.py``, ``schedule_policy.py``, v0.4-v0.5;
  ``--enable-mixed-chunk``, off by default, would add the decodes to that batch,
  which is the ``chunked`` policy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.sched.request import Request, RequestStatus

if TYPE_CHECKING:
    from infercast.sched.scheduler import Scheduler

Entries = dict[str, tuple[Request, int]]
_NO_HITS: list[int] = []  # no prefix-cache hits (never mutated)


class _Restart(Exception):
    """A group member had to be preempted: the group step was undone; schedule again."""


def _run_running(
    s: Scheduler, order: list[Request], budget: int, entries: Entries, preempted: list[str]
) -> int:
    """Schedule explicit running requests in ``order``, preempting the newest when KV is full."""
    for req in order:
        if req.status is not RequestStatus.RUNNING:
            continue  # preempted as a victim earlier in this loop
        if budget <= 0:
            break
        n = min(req.num_remaining_tokens, budget)
        while not s.allocate_for(req, n):
            victim = next(reversed(s.running.values()))  # the newest
            if victim.dbase >= 0:  # newest is in the decode group: go per request
                s.dissolve_group()
                raise _Restart
            s.preempt(victim)
            preempted.append(victim.request_id)
            if victim.request_id in entries:  # it was scheduled earlier this step: undo
                budget += entries.pop(victim.request_id)[1]
            if victim is req:
                break
        if req.status is RequestStatus.RUNNING:
            entries[req.request_id] = (req, n)
            budget -= n
    return budget


def admit_waiting(s: Scheduler, entries: Entries, budget: int, chunked: bool) -> None:
    """Admit waiting requests FCFS while seats, budget and KV last.

    With ``max_prefill_tokens`` (SGLang's ``--max-prefill-tokens``) a request that is not the
    step's first prompt (or chunk) starts only while its whole remaining prompt is below the cap
    less the tokens the step already holds: ``PrefillAdder`` starts ``rem_input_tokens`` at
    ``max_prefill_tokens`` less the running decodes under ``--enable-mixed-chunk``, takes each
    admitted prompt or chunk from it as from ``rem_chunk_tokens`` (``_update_prefill_budget``),
    and ``add_one_req`` returns OTHER (admission stops) when ``input_tokens >= rem_input_tokens``
    and ``can_run_list`` is not empty (``python/sglang/srt/managers/schedule_policy.py``,
    v0.4-v0.5; ``scheduler.py`` ``get_new_batch_prefill``). The step's token budget is spent by
    the same tokens, so the cap left is ``cap - (max_num_batched_tokens - budget)``. Under
    ``sglang-ignore-eos`` ``add_one_req_ignore_eos`` makes no such check before a request: it
    returns ``budget_state()`` after adding one, which stops admission once ``rem_input_tokens``
    is spent."""
    bs, max_seqs, waiting, running = (
        s.config.block_size,
        s.config.max_num_seqs,
        s.waiting,
        s.running,
    )
    caching = s.config.enable_prefix_caching
    ratio = s.ratio
    if ratio is not None and waiting and budget > 0 and len(running) < max_seqs:
        reserved = ratio.running_reserve(s) + ratio.step_reserve(entries)
    cap = s.config.max_prefill_tokens
    if cap:  # SGLang's input cap: what it leaves is the cap less what the step already holds
        cap -= s.config.max_num_batched_tokens
        first = not any(
            n > 1 or r.num_computed_tokens < r.prompt_tokens for r, n in entries.values()
        )
        after_only = ratio is not None and ratio.ignore_eos  # checked after an admission only
        added = False
    while waiting and budget > 0 and len(running) < max_seqs:
        req = waiting[0]
        hits = s.prefix_hits(req) if caching else _NO_HITS
        remaining = req.prompt_tokens + req.num_output_tokens - len(hits) * bs
        if cap:
            if after_only:
                if added and cap + budget <= 0:
                    break
                added = True
            elif not first and remaining >= cap + budget:
                break
            first = False
        n = min(remaining, budget)
        if not chunked and n < remaining:
            if entries:
                break  # whole prompts only; an oversize recompute goes alone
            n = remaining
        if ratio is not None:
            if not ratio.fits(s, req, remaining, reserved):
                break
            if n == remaining:  # its whole prompt runs now: its output is charged in full
                reserved += ratio.output_estimate(req)
        if not s.admit(req, hits, n):
            break
        entries[req.request_id] = (req, n)
        budget -= n


def _head_fits(s: Scheduler, budget: int, chunked: bool) -> bool:
    """Would the first waiting request be admitted with this budget (no side effects)?"""
    cfg = s.config
    if not s.waiting or budget <= 0 or len(s.running) >= cfg.max_num_seqs:
        return False
    req = s.waiting[0]
    if not cfg.enable_prefix_caching:  # no hits: the admission cost is its fresh blocks
        remaining = req.prompt_tokens + req.num_output_tokens
        n = remaining if not chunked or remaining < budget else budget
        if s.ratio is not None and not s.ratio.fits(s, req, remaining, s.ratio.running_reserve(s)):
            return False
        if s.reserve_full:
            n = s.admission_tokens(req, 0, n)
        return -(-n // cfg.block_size) <= s.kv.num_free_blocks
    hits = s.prefix_hits(req)
    remaining = req.num_tokens - len(hits) * s.config.block_size
    n = min(remaining, budget) if chunked else remaining
    if s.ratio is not None and not s.ratio.fits(s, req, remaining, s.ratio.running_reserve(s)):
        return False
    return s.admission_cost(req, hits, n) <= s.kv.num_free_blocks


def _with_group(
    s: Scheduler, explicit_order, budget: int, preempted: list[str]
) -> tuple[Entries, int]:
    """Run the decode group (if KV allows) plus explicit requests; retry per request on conflict."""
    while True:
        entries: Entries = {}
        n = s.start_group_step()
        if not n and s.group:  # KV short, the group kept: it preempts its newest members
            n = s.shed_group(preempted)
        left = budget - n
        if not s.explicit:  # only the group runs (it may have dissolved into explicit requests)
            return entries, left
        try:
            left = _run_running(s, explicit_order(s), left, entries, preempted)
        except _Restart:
            continue
        return entries, left


class StaticPolicy:
    """Fixed batches run to completion; KV reserved for the longest possible output."""

    name = "static"
    group_head = None  # ``would_admit`` is False while anything runs (``group_head`` below)

    def schedule(self, s: Scheduler) -> tuple[list[tuple[Request, int]], list[str]]:
        if s.running:  # KV was reserved at admission: the group step never lacks blocks
            preempted: list[str] = []
            running, _ = _with_group(
                s, lambda s: list(s.explicit.values()), s.config.max_num_batched_tokens, preempted
            )
            if preempted:
                raise RuntimeError("static batch outgrew its KV reservation")
            return list(running.values()), []
        entries: Entries = {}
        budget = s.config.max_num_batched_tokens
        bs = s.config.block_size
        while s.waiting and len(s.running) < s.config.max_num_seqs:
            req = s.waiting[0]
            hits = s.prefix_hits(req)
            remaining = req.num_tokens - len(hits) * bs
            if entries and remaining > budget:
                break
            reserve = req.prompt_tokens + req.max_output_tokens - 1 - len(hits) * bs
            if not s.admit(req, hits, reserve):
                break
            entries[req.request_id] = (req, remaining)
            budget -= remaining
        return list(entries.values()), []

    def would_admit(self, s: Scheduler) -> bool:
        return bool(s.waiting) and not s.running


class ContinuousPolicy:
    """vLLM v0: prefill-only steps of whole prompts first, else everyone decodes."""

    name = "continuous"
    group_head = (False, False)

    def schedule(self, s: Scheduler) -> tuple[list[tuple[Request, int]], list[str]]:
        entries: Entries = {}
        admit_waiting(s, entries, s.config.max_num_batched_tokens, chunked=False)
        if entries:
            return list(entries.values()), []
        preempted: list[str] = []
        entries, _ = _with_group(
            s, lambda s: list(s.explicit.values()), s.config.max_num_batched_tokens, preempted
        )
        return list(entries.values()), preempted

    def would_admit(self, s: Scheduler) -> bool:
        return _head_fits(s, s.config.max_num_batched_tokens, chunked=False)


class ChunkedPolicy:
    """vLLM v1 / Sarathi-Serve: decodes first, then prefill chunks within the budget."""

    name = "chunked"
    group_head = (True, True)

    def schedule(self, s: Scheduler) -> tuple[list[tuple[Request, int]], list[str]]:
        budget = s.config.max_num_batched_tokens
        if not s.explicit:  # the common case: the group (if KV allows) and admissions, as below
            left = budget - s.start_group_step()
            if not s.explicit and (s._pending_group or not s.group):  # the group ran: no preemption
                entries: Entries = {}
                admit_waiting(s, entries, left, chunked=True)
                return list(entries.values()), []
        preempted: list[str] = []
        entries, budget = _with_group(s, _decodes_first, budget, preempted)
        if not preempted:  # as vLLM v1: no new admissions in a step that had to preempt
            admit_waiting(s, entries, budget, chunked=True)
        return list(entries.values()), preempted

    def would_admit(self, s: Scheduler) -> bool:
        explicit = sum(r.num_remaining_tokens for r in s.explicit.values()) if s.explicit else 0
        budget = s.config.max_num_batched_tokens - len(s.group) - explicit
        return _head_fits(s, budget, chunked=True)


class PrefillFirstPolicy:
    """SGLang: prefill batches (chunked to the budget) whenever possible, else everyone decodes."""

    name = "prefill-first"
    group_head = (True, False)

    def schedule(self, s: Scheduler) -> tuple[list[tuple[Request, int]], list[str]]:
        budget = s.config.max_num_batched_tokens
        preempted: list[str] = []
        entries: Entries = {}
        while (
            True
        ):  # the unfinished chunked prompts first (a preemption may dissolve the group: retry)
            entries = {}
            prefilling = [r for r in s.explicit.values() if r.num_remaining_tokens > 1]
            try:
                left = (
                    _run_running(s, prefilling, budget, entries, preempted)
                    if prefilling
                    else budget
                )
            except _Restart:
                continue
            break
        if not preempted:
            admit_waiting(s, entries, left, chunked=True)
        if entries:
            return list(entries.values()), preempted
        decodes, _ = _with_group(s, lambda s: list(s.explicit.values()), budget, preempted)
        return list(decodes.values()), preempted

    def would_admit(self, s: Scheduler) -> bool:
        return _head_fits(s, s.config.max_num_batched_tokens, chunked=True)


def _decodes_first(s: Scheduler) -> list[Request]:
    if not s.explicit:
        return []
    explicit = list(s.explicit.values())
    return [r for r in explicit if r.num_remaining_tokens == 1] + [
        r for r in explicit if r.num_remaining_tokens != 1
    ]


# ``group_head``: ``would_admit`` when only the decode group runs (no explicit request), as the
# arguments of ``_head_fits``: None when it is False, else (``chunked``, whether the budget is
# what the group's one token per member leaves); ``decode_horizon`` calls ``_head_fits`` with
# them directly, one call instead of two.
_POLICIES = {p.name: p for p in (StaticPolicy, ContinuousPolicy, ChunkedPolicy, PrefillFirstPolicy)}


def make_policy(name: str) -> StaticPolicy | ContinuousPolicy | ChunkedPolicy | PrefillFirstPolicy:
    """The policy object for a name in :data:`~infercast.sched.scheduler.POLICY_NAMES`."""
    return _POLICIES[name]()
