"""One model replica: schedule -> cost model step time -> advance, on the event kernel.

The replica owns a :class:`~infercast.sched.Scheduler` (the same one the CPU
engine uses) and a *step timer* (:class:`~infercast.sim.timer.StepTimer`;
``infercast.cost.step.StepModel`` is the usual one). Every step, whatever its
kind, has one lifecycle::

    _start: plan = the next step's plan      (a batch, one group step, or a segment)
            account its time, observe, post its end on the kernel
    _end:   plan.end(now)                    (its token times; the scheduler advances)
            finish the requests it finished, then _start the next (after this
            instant's arrivals)

A plan is one of three kinds, each supplying its duration and its token ends:

- :class:`_BatchStep`: the scheduler's :class:`~infercast.sched.Batch`, timed by
  the cost model (the reference; ``fast=False`` runs only these).
- :class:`_GroupStep`: the decode group's next step alone (fast mode, when
  :meth:`Scheduler.decode_horizon` says 1): no batch, timed by the affine form.
- :class:`_Segment`: the next ``k`` all-decode steps at once (fast mode, horizon
  ``k >= 2``): step j of n sequences whose contexts sum to S0 takes
  ``a + b*(S0 + n*j)`` seconds (``decode_affine``), so the end of step j
  (1-based) is ``t0 + j*(a + b*S0) + b*n*j*(j-1)/2`` in closed form. An arrival
  routed here mid-segment cuts it at the first step end at or after the arrival,
  which is exactly when the exact mode would first see it.

Request polling (``recv_interval`` k > 1, SGLang's ``--scheduler-recv-interval``): the engine
reads new requests from its tokenizer only when a counter reaches k; a decode step adds 1, a
step with a prefill adds 1,000, so requests are taken at once after a prefill and otherwise
every k decode steps (``python/sglang/srt/managers/scheduler_recv_skipper.py``,
``SchedulerRecvSkipper.handle``: weights DECODE 1, idle 1, default 1,000). Requests that arrive
while the replica is busy wait in an inbox until then; an idle replica takes them at once (its
loop spins). A segment is cut at the polling step, not at the first step end.

Async scheduling (``async_scheduling``, vLLM's ``--async-scheduling``, on by default from v0.14):
the engine schedules step N+1 as soon as step N is launched, before N's outputs are known, so
the contents of a step are fixed when the step before it starts (``vllm/v1/engine/core.py``
``EngineCore.step_with_batch_queue``: with a batch queue of 2 a new batch is scheduled while the
queue has room, and the loop blocks on the oldest batch only when it is full; new requests are
read between steps). A request that arrives while a step runs therefore joins the step after
the next one: it waits in a holding list until the end of the step that follows its arrival
(an arrival exactly at a step's start counts as before it, as an arrival at a step end does in
the synchronous loop). An idle replica takes it at once, as does one left with nothing to run.
A segment under way is cut one step after the first step end at or after the arrival.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import islice
from typing import Any

import numpy as np

from infercast.metrics.records import RequestRecord
from infercast.sched import Batch, Request, RequestStatus, Scheduler
from infercast.sim.collect import Completions, GapTally, finished_record, rejected_record
from infercast.sim.kernel import PRIO_STEP_END, Kernel
from infercast.sim.timeline import Timeline
from infercast.sim.timer import AffineStepTimer, FastStepTimer, HostTierTimer, StepTimer

_RUNNING = RequestStatus.RUNNING  # a module constant: cheaper to read than the enum member

# Timeline entries held before the first compaction (then the threshold doubles).
TIMELINE_COMPACT_MIN = 1 << 16

# (j, j*(j-1)) of a segment's steps j = 1..32, as floats, for ``_Segment.end``: its step ends take
# float products only (an int times a float runs CPython's generic, slower path), equal to
# :meth:`_Segment.step_end`'s (these ints are exact as floats).
_STEP_TERMS = tuple((float(j), float(j * (j - 1))) for j in range(1, 33))


def _step_lists(batch: Batch) -> tuple[list[int], list[float]]:
    """(new tokens, cached tokens) per sequence of a batch, for the cost model.

    A compact decode group of n requests whose contexts sum to S enters as n
    one-token decodes of S/n each: with full attention the cost model sees
    decode contexts only through their sum, so equal shares cost the same.
    """
    nd = batch.num_decode_seqs
    new = [s.num_new_tokens for s in batch.seqs] + [1] * nd
    cached = [float(s.num_cached_tokens) for s in batch.seqs]
    if nd:
        cached += [batch.decode_cached_tokens / nd] * nd
    return new, cached


class ReplicaStats:
    """Counters over a run: steps, busy time, time-weighted batch size and KV usage."""

    __slots__ = ("num_steps", "num_segments", "busy_s", "seq_time_s", "kv_time_s", "peak_kv_usage")

    def __init__(self) -> None:
        self.num_steps = 0
        self.num_segments = 0
        self.busy_s = 0.0
        self.seq_time_s = 0.0  # integral of batch size over busy time
        self.kv_time_s = 0.0  # integral of KV usage over busy time
        self.peak_kv_usage = 0.0

    def add(self, steps: int, duration_s: float, num_seqs: int, kv_usage: float) -> None:
        """``steps`` model steps of ``num_seqs`` sequences over ``duration_s`` at ``kv_usage``."""
        self.num_steps += steps
        self.busy_s += duration_s
        self.seq_time_s += duration_s * num_seqs  # a float times an int: CPython's shorter path
        self.kv_time_s += kv_usage * duration_s
        if kv_usage > self.peak_kv_usage:
            self.peak_kv_usage = kv_usage


class _BatchStep:
    """A plan: the scheduler's batch, timed by the cost model."""

    __slots__ = ("rep", "batch", "num_seqs", "end_s")

    def __init__(self, rep: Replica) -> None:
        self.rep = rep
        self.batch = Batch()
        self.num_seqs = 0
        self.end_s = 0.0

    def start(self, now: float) -> float | None:
        """Schedule the batch; its duration (None: nothing to run)."""
        rep = self.rep
        sched = rep.sched
        batch = self.batch = sched.schedule()
        seqs, nd = batch.seqs, batch.num_decode_seqs
        if not seqs and not nd:
            return None
        for rid in batch.preempted:
            rep._flush(sched.requests[rid])
        for seq in seqs:
            req = seq.req
            if req.first_scheduled_s is None:
                req.first_scheduled_s = now
        # The cost model's time of the batch: as sums when it can, else per-sequence lists.
        fast = rep._fast_timer
        if fast is None:
            dt = rep.timer.step_time_s(*_step_lists(batch))
        elif len(seqs) == 1:  # one prefill chunk beside the group: no lists
            seq = seqs[0]
            dt = fast.chunk_step_time_s(
                nd, batch.decode_cached_tokens, seq.num_new_tokens, seq.num_cached_tokens
            )
        elif not seqs:  # the decodes alone (exact mode's usual step): no lists built
            dt = fast.mixed_step_time_s(nd, batch.decode_cached_tokens, (), ())
        else:
            new, cached = [], []  # one loop: in 3.11 a list comprehension is a call
            for seq in seqs:
                new.append(seq.num_new_tokens)
                cached.append(seq.num_cached_tokens)
            dt = fast.mixed_step_time_s(nd, batch.decode_cached_tokens, new, cached)
        if rep._reload is not None:  # prefix blocks copied back from the host tier: the step waits
            tier = sched.kv.host_tier
            assert tier is not None  # a reload timer exists only beside a host tier
            dt = rep._reload.step_time_s(dt, tier.take_loaded())
        self.num_seqs = len(seqs) + nd
        self.end_s = now + dt
        return dt

    def end(self, now: float) -> list[Request]:
        """First tokens of the listed requests, the decode step's entry, the scheduler's update."""
        rep = self.rep
        batch = self.batch
        gaps = rep.gaps
        decoding = batch.num_decode_seqs
        started: list[Request] = []
        for seq in batch.seqs:
            req = seq.req
            if req.timeline_start >= 0:
                decoding += 1
            elif seq.samples:
                times = req.token_times
                if times and gaps is not None:  # first token after a recompute
                    gaps.explicit(now - times[-1])
                times.append(now)  # first token (or first after a recompute)
                started.append(req)
        if decoding:
            if decoding != rep._num_decoding:
                raise RuntimeError(
                    "a step ran only some decoding requests; timeline would be wrong"
                )
            rep._record(now, decoding)
        done = rep.sched.update(batch)
        if not started:
            return done
        size = rep.timeline.size()
        for req in started:
            if req.status is _RUNNING:  # not finished by this step
                req.timeline_start = size
                rep._num_decoding += 1
                if not decoding and gaps is not None:  # its token is not on the timeline
                    gaps.off(req.request_id, now)
        return done


class _GroupStep:
    """A plan: the decode group's next step alone, as ``schedule()`` would run it (its KV blocks
    first, the same event), timed by the affine form ``a + b*S0`` (the cost model's mixed step
    within ~1e-12 relative) and ended without a ``Batch``."""

    __slots__ = ("rep", "num_seqs", "end_s")

    def __init__(self, rep: Replica) -> None:
        self.rep = rep
        self.num_seqs = 0
        self.end_s = 0.0

    def start(self, now: float) -> float:
        rep = self.rep
        sched = rep.sched
        sched.start_group_step()  # its new blocks: the horizon says they fit; nothing is admitted
        n = self.num_seqs = len(sched.group)
        a, b = rep._affines.get(n) or rep._affine(n)
        dt = a + b * sched.group_context
        self.end_s = now + dt
        return dt

    def end(self, now: float) -> list[Request]:
        rep = self.rep
        rep._record(now, rep._num_decoding)  # every decoding request is in the group and ran
        return rep.sched.end_group_step()


class _Segment:
    """A plan: k all-decode steps in closed form; step j (1-based) ends at ``step_end(j)``."""

    __slots__ = ("rep", "start_s", "c1", "c2", "steps", "num_seqs", "end_s", "kv_usage")

    def __init__(self, rep: Replica) -> None:
        self.rep = rep
        self.start_s = self.c1 = self.c2 = self.end_s = self.kv_usage = 0.0
        self.steps = self.num_seqs = 0

    def start(self, now: float, k: int) -> None:
        """Duration unknown until it ends (an arrival may cut it): accounted by :meth:`end`."""
        rep = self.rep
        sched = rep.sched
        n = self.num_seqs = len(sched.group)
        a, b = rep._affines.get(n) or rep._affine(n)
        # Step j (1-based) ends at t0 + j*c1 + c2*j*(j-1): sum of a + b*(S0 + n*i), i < j.
        self.start_s, self.steps = now, k
        self.c1, self.c2 = a + b * sched.group_context, b * n * 0.5
        self.end_s = self.step_end(k)
        rep.stats.num_segments += 1

    def step_end(self, j: int) -> float:
        return self.start_s + self.c1 * j + self.c2 * (j * (j - 1))  # float * int: as above

    def cut(self, now: float) -> bool:
        """End at the first step end at or after ``now`` (an arrival); True if that is earlier.

        That step is the smallest j in [1, steps] with step_end(j) >= now: the root of the
        quadratic, then checked against the step ends around it.
        """
        c1, c2, dt, steps = self.c1, self.c2, now - self.start_s, self.steps
        if c2 > 0:
            lin = c1 - c2
            j = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * c2 * dt)) / (2.0 * c2))
        else:
            j = math.ceil(dt / c1)
        j = min(max(j, 1), steps)
        while j > 1 and self.step_end(j - 1) >= now:
            j -= 1
        end = self.step_end(j)
        while j < steps and end < now:
            j += 1
            end = self.step_end(j)
        if j >= steps:
            return False
        self.steps, self.end_s = j, end
        return True

    def cut_after(self, now: float) -> bool:
        """End one step after the first step end at or after ``now`` (an arrival under async
        scheduling, module docstring); True if that is earlier than planned."""
        steps = self.steps
        if not self.cut(now):  # that first step end is the last one: nothing after it here
            return False
        j = self.steps + 1
        self.steps, self.end_s = steps, self.step_end(steps)
        return self.cut_at(j)

    def cut_at(self, j: int) -> bool:
        """End after step ``j`` (1-based) when that is earlier than planned; True if cut."""
        if j >= self.steps:
            return False
        self.steps, self.end_s = j, self.step_end(j)
        return True

    def end(self, now: float) -> list[Request]:
        """Its m steps' timeline entries (and ITL gaps), accounted now; the scheduler advances m."""
        rep = self.rep
        m, n = self.steps, self.num_seqs
        s, c1, c2 = self.start_s, self.c1, self.c2
        rep.stats.add(m, now - s, n, self.kv_usage)
        tl = rep.timeline
        if len(tl) + m > rep._compact_at:
            rep._compact(m)
        # End times of steps 1..m, as :meth:`step_end` computes them, onto the timeline.
        if m <= len(_STEP_TERMS):  # mostly a few steps (cut by arrivals): numpy costs more
            for j, jj in _STEP_TERMS[:m]:  # a loop: in 3.11 a list comprehension is a call
                tl.append(s + j * c1 + c2 * jj)
        else:
            js = np.arange(1, m + 1, dtype=np.float64)
            tl.extend((s + js * c1 + c2 * (js * (js - 1))).tolist())
        if rep._gap_counts is not None:
            rep._gap_counts.extend([n] * m)
        return rep.sched.advance_decode(m)


class Replica:
    """A scheduler plus a step timer driven by the kernel (see module doc)."""

    # Slots, not an instance dict: its 40 attributes are past the 30 keys CPython 3.11 shares
    # per class, so each read would be a dict lookup (subclasses may add a dict).
    __slots__ = (
        "index",
        "recv_interval",
        "_polls",
        "_capped",
        "_inbox",
        "_recv_count",
        "_recv_due",
        "_lags",
        "_held",
        "_plan_start",
        "_prev_start",
        "sched",
        "_kv",
        "timer",
        "_fast_timer",
        "_affine_timer",
        "kernel",
        "emit",
        "complete",
        "_wants_times",
        "_finish_posts",
        "timeline",
        "gaps",
        "_gap_counts",
        "fast",
        "max_segment_steps",
        "observe",
        "_obs_due",
        "_compact_at",
        "stats",
        "outstanding_tokens",
        "_busy",
        "_num_decoding",
        "_affines",
        "_context_limit",
        "_windowed",
        "_past_limit",
        "_affines_pre",
        "_affines_past",
        "_past_joins",
        "_batch_step",
        "_group_step",
        "_segment",
        "_plan",
        "_handle",
        "_on_end",
        "_on_start",
        "_reload",
    )

    def __init__(
        self,
        index: int,
        scheduler: Scheduler,
        timer: StepTimer,
        kernel: Kernel,
        emit: Callable[[RequestRecord, int], None],
        fast: bool = True,
        max_segment_steps: int = 4096,
        observe: Callable[[float, Replica, int, float], tuple[float, float]] | None = None,
        complete: Completions | None = None,
        itl: Callable[[np.ndarray, np.ndarray], None] | None = None,
        recv_interval: int = 1,
        async_scheduling: bool = False,
    ):
        self.index = index
        if recv_interval < 1:
            raise ValueError(f"recv_interval {recv_interval!r}: must be >= 1")
        self.recv_interval = recv_interval  # decode steps between request polls (module doc)
        self._polls = recv_interval > 1  # the flag the step reads (a load, not a comparison)
        self._inbox: list[Request] = []  # arrived while busy, not yet polled
        self._recv_count = 0  # the poll counter: decode steps since the last poll
        self._recv_due = False  # the step that just ended reached the poll
        self._lags = async_scheduling  # contents fixed a step ahead (module doc, "Async ...")
        self._held: list[tuple[float, Request]] = []  # (arrival, request) while a step ran
        self._plan_start = 0.0  # when the plan under way started
        self._prev_start = -math.inf  # when the last step of the plan that just ended started
        self.sched = scheduler
        self._kv = scheduler.kv  # its block manager (fixed): read for the usage every step
        self.timer = timer
        # The cost model's sums-only methods, when it has them (checked once, here).
        self._fast_timer = timer if isinstance(timer, FastStepTimer) else None
        self._affine_timer = timer if isinstance(timer, AffineStepTimer) else None
        if fast and self._affine_timer is None:
            raise TypeError(
                f"fast mode needs an AffineStepTimer; {type(timer).__name__} is not one"
            )
        self.kernel = kernel
        self.emit = emit  # (record, replica index) for every finished or rejected request
        # Completed requests go to ``complete`` (no record) and their ITL values, per step, to
        # ``itl`` (both or neither; then every finished request is a record through ``emit``).
        self.complete = complete
        self._wants_times = complete is not None and complete.wants_times  # fixed for the run
        # Whether finishing a request may post an event at this instant (an open loop's buffer
        # does not; a record through ``emit`` may reach a closed loop's client).
        self._finish_posts = complete is None or complete.posts_events
        self.timeline = Timeline()
        self.gaps = (
            GapTally(itl, self.timeline) if complete is not None and itl is not None else None
        )
        # Its per-entry counts, appended to with each timeline entry (one list for the whole run).
        self._gap_counts = self.gaps.counts if self.gaps is not None else None
        self.fast = fast
        self.max_segment_steps = max_segment_steps
        self.observe = observe  # returns (last sample, interval): see TimeSeries.observe
        # A lower bound of when the time series' next sample can be due: ``observe`` samples when
        # ``now - last >= interval`` and returns (last, interval), the interval only growing, so
        # every such ``now`` is >= (last + interval) * (1 - 1e-12) (times are >= 0; the margin
        # dwarfs the subtraction's rounding). A step before it skips the call.
        self._obs_due = -math.inf if observe is not None else math.inf
        self._compact_at = TIMELINE_COMPACT_MIN
        self.stats = ReplicaStats()
        self.outstanding_tokens = 0  # prompt + max output of requests here, for routing
        self._busy = False  # from an arrival at an idle replica until a start finds nothing to run
        self._num_decoding = 0
        self._affines: dict[int, tuple[float, float]] = {}
        limit = self._affine_timer.affine_context_limit if self._affine_timer else math.inf
        self._context_limit = float(limit)
        self._windowed = self._context_limit != math.inf
        # Whether a group-only run may end before the horizon (the window's edge, a poll): one
        # flag for ``_start`` to read when neither applies.
        self._capped = self._windowed or self._polls or self._lags
        # Past the window (every context >= this): the other affine form, in its own table.
        past = getattr(self._affine_timer, "affine_past_window_context", math.inf)
        self._past_limit = float(past) if self._windowed else math.inf
        self._affines_pre = self._affines
        self._affines_past: dict[int, tuple[float, float]] = {}
        # ``sched.group_joins`` when ``_cap_by_window`` last found every context past the window
        # (-1: never). Those members stay past it (contexts only grow), so later calls look only
        # at the members that joined since.
        self._past_joins = -1
        # One plan object of each kind, refilled per step; ``_plan`` is the one under way.
        self._batch_step = _BatchStep(self)
        self._group_step = _GroupStep(self)
        self._segment = _Segment(self)
        self._plan: _BatchStep | _GroupStep | _Segment | None = None
        self._handle: list[Any] = []  # the kernel entry of the plan's end
        self._on_end, self._on_start = self._end, self._start  # bound once, not once per event
        # A host KV tier's reloads (cost/kv_tier.KvReload): a step waits for the blocks copied back.
        self._reload = (
            timer.kv_reload
            if isinstance(timer, HostTierTimer) and scheduler.kv.host_tier is not None
            else None
        )

    # ---- arrivals ---------------------------------------------------------------
    def submit(self, req: Request) -> None:
        """A request arrives now (kernel time)."""
        if self._lags and self._busy:  # the next step is already fixed: it joins the one after
            self.outstanding_tokens += req.prompt_tokens + req.max_output_tokens
            now = self.kernel.now
            self._held.append((now, req))
            plan = self._plan
            if plan is self._segment and plan.cut_after(now):
                Kernel.cancel(self._handle)
                self._handle = self.kernel.at(plan.end_s, PRIO_STEP_END, self._on_end)
            return
        if self._polls and self._busy:  # waits for the engine's next poll
            self.outstanding_tokens += req.prompt_tokens + req.max_output_tokens
            self._inbox.append(req)
            plan = self._plan
            now = self.kernel.now
            if plan is self._segment and plan.step_end(plan.steps) >= now:
                self._cut_at_poll(plan, now)
            return
        if not self.sched.add_request(req):
            self.emit(rejected_record(req, self.kernel.now, req.reject_reason), self.index)
            return
        self.outstanding_tokens += req.prompt_tokens + req.max_output_tokens
        plan = self._plan
        if plan is self._segment:  # a segment under way: cut it at its first step end >= now
            if plan.cut(self.kernel.now):
                Kernel.cancel(self._handle)
                self._handle = self.kernel.at(plan.end_s, PRIO_STEP_END, self._on_end)
        elif not self._busy:  # idle: start a step once this instant's arrivals are queued
            self._busy = True
            self.kernel.after_arrivals(self._on_start)

    # ---- the step lifecycle -------------------------------------------------------
    def _start(self) -> None:
        """Plan the next step, account it, observe, and post its end (idle when nothing runs)."""
        now = self.kernel.now
        if self._polls and (self._recv_due or not self.sched.has_unfinished):
            self._recv_due = False
            self._poll(now)
        if self._lags and self._held:
            self._release(now)
        k = self.sched.decode_horizon(self.max_segment_steps) if self.fast else 0
        if k and self._capped:
            if self._windowed:
                k = self._cap_by_window(k)
            if k and self._inbox:  # the segment ends at the poll that takes them
                k = min(k, self.recv_interval - self._recv_count)
            if k and self._held:  # they join the step after this one: one step, then look
                k = 1
        plan: _BatchStep | _GroupStep | _Segment
        if k >= 2:
            plan = self._segment
            plan.start(now, k)
            dt = None
        else:
            step = self._group_step if k else self._batch_step
            dt = step.start(now)
            if dt is None:
                if self._held:  # nothing runs: the held requests join at once
                    self._prev_start = math.inf
                    self._release(now)
                    self._start()
                    return
                self._busy = False
                return
            plan = step
        # ``BlockManager.usage`` as the plan left it, computed once for the statistics and the
        # time series (no property call).
        kv = self._kv
        kv_usage = (kv.num_blocks - kv.num_free_blocks) / kv.num_blocks
        if dt is None:  # a segment: accounted when it ends, cut or not, at this usage (no
            self._segment.kv_usage = kv_usage  # block is taken or given until then)
        else:
            self.stats.add(1, dt, plan.num_seqs, kv_usage)
        if now >= self._obs_due:  # else ``observe`` would ignore the call (inf: no ``observe``)
            last, interval = self.observe(now, self, plan.num_seqs, kv_usage)  # type: ignore[misc]
            self._obs_due = (last + interval) * (1.0 - 1e-12)
        self._plan = plan
        self._plan_start = now
        self._handle = self.kernel.at(plan.end_s, PRIO_STEP_END, self._on_end)

    def _end(self) -> None:
        """The plan's steps ended: token times, the scheduler's update, finishes, the next step."""
        now = self.kernel.now
        plan, self._plan = self._plan, None
        assert plan is not None, "a step ended that was never started"
        if self._polls:
            self._count_poll(plan)
        if self._lags:  # the start of its last step: what arrived by then joins the next step
            seg = self._segment  # the plan itself when it is a segment (typed as one here)
            if seg is not None and plan is seg and seg.steps > 1:
                self._prev_start = seg.step_end(seg.steps - 1)
            else:
                self._prev_start = self._plan_start
        done = plan.end(now)
        if done:
            for req in done:
                self._finish(req, now)
            if self._finish_posts:
                # A finish may have posted an arrival at this instant (a client's next request, a
                # transfer): start the next step after it (still busy: an arrival now does not
                # kick).
                self.kernel.after_arrivals(self._on_start)
                return
        # Nothing ran that could post an event: every arrival of this instant ran before this
        # step end (they sort first), none is still to come.
        self._start()

    # ---- request polling (recv_interval > 1; module doc) ------------------------------
    def _count_poll(self, plan: _BatchStep | _GroupStep | _Segment) -> None:
        """Advance the poll counter by the step(s) that just ended; mark a poll due at its end."""
        k = self.recv_interval
        if plan is self._segment:
            total = self._recv_count + plan.steps  # decode steps, 1 each
            self._recv_count = total % k
            self._recv_due = total >= k and self._recv_count == 0
            return
        weight = 1
        if plan is self._batch_step and any(
            s.num_new_tokens > 1 or s.req.timeline_start < 0 for s in plan.batch.seqs
        ):
            weight = k  # a prefill step weighs 1,000 >= any interval: a poll follows it
        total = self._recv_count + weight
        self._recv_due = total >= k
        self._recv_count = 0 if self._recv_due else total

    def _cut_at_poll(self, seg: _Segment, now: float) -> None:
        """Cut a segment under way at its first polling step that ends at or after ``now``."""
        k = self.recv_interval
        j = k - self._recv_count  # the first poll of this segment
        while seg.step_end(j) < now:
            j += k
        if seg.cut_at(j):
            Kernel.cancel(self._handle)
            self._handle = self.kernel.at(seg.end_s, PRIO_STEP_END, self._on_end)

    def _release(self, now: float) -> None:
        """Async scheduling: the held requests that arrived by the start of the step that just
        ended join the scheduler's queue (all of them when nothing else is left to run)."""
        cut = self._prev_start if self.sched.has_unfinished else math.inf
        held, self._held = self._held, []
        for t, req in held:
            if t > cut:
                self._held.append((t, req))
            elif not self.sched.add_request(req):
                self.outstanding_tokens -= req.prompt_tokens + req.max_output_tokens
                self.emit(rejected_record(req, now, req.reject_reason), self.index)

    def _poll(self, now: float) -> None:
        """The engine reads its inbox: every waiting request joins the scheduler's queue."""
        inbox, self._inbox = self._inbox, []
        for req in inbox:
            if not self.sched.add_request(req):
                self.outstanding_tokens -= req.prompt_tokens + req.max_output_tokens
                self.emit(rejected_record(req, now, req.reject_reason), self.index)

    def _cap_by_window(self, k: int) -> int:
        """Group-only steps ahead, at most ``k``, on one affine form of a windowed model: all
        ``k`` past the window when the shortest context already covers it (contexts only grow;
        ``decode_affine_past_window``), else those before the longest reaches the window edge
        (``decode_affine``); 0 in between (steps listed one by one). Selects the form's table."""
        s = self.sched
        d = s.dstep
        joins = s.group_joins
        if self._past_joins >= 0:
            # Every member then was past the window, and still is (contexts only grow): only
            # those that joined since need a look, and they are among the group's newest ``new``
            # entries (dict order is join order; the older ones among them are past already).
            new = joins - self._past_joins
            late = islice(reversed(s.group.values()), new)
            limit = self._past_limit
            if all(r.num_computed_tokens + d - r.dbase >= limit for r in late):
                self._past_joins = joins
                self._affines = self._affines_past
                return k
        ctx = [r.num_computed_tokens + d - r.dbase for r in s.group.values()]
        if min(ctx) >= self._past_limit:
            self._past_joins = joins
            self._affines = self._affines_past
            return k
        self._affines = self._affines_pre
        return max(0, min(k, int(self._context_limit) - max(ctx)))

    def _affine(self, n: int) -> tuple[float, float]:
        """(a, b) of a decode step of ``n`` sequences (``a + b * context``), into ``_affines``."""
        timer = self._affine_timer
        assert timer is not None, "only fast mode times steps by their affine form"
        if self._affines is self._affines_past:  # _cap_by_window chose the past-window form
            ab = self._affines[n] = timer.decode_affine_past_window(n)  # type: ignore[attr-defined]
        else:
            ab = self._affines[n] = timer.decode_affine(n)
        return ab

    def _record(self, now: float, num_decoding: int) -> None:
        """A decode step of ``num_decoding`` requests ended now: a timeline entry, its ITL gap."""
        tl = self.timeline
        if len(tl) >= self._compact_at:
            self._compact(1)
        tl.append(now)
        if self._gap_counts is not None:
            self._gap_counts.append(num_decoding)

    # ---- per-request records ----------------------------------------------------
    def _compact(self, extra: int) -> None:
        """Drop timeline entries no active request needs (amortized: the threshold doubles)."""
        tl = self.timeline
        if self.gaps is not None:  # its gaps are read from the entries about to go
            self.gaps.flush()
        starts = [r.timeline_start for r in self.sched.running.values() if r.timeline_start >= 0]
        tl.drop_before(min(starts) if starts else tl.size())
        self._compact_at = max(TIMELINE_COMPACT_MIN, 2 * (len(tl) + extra))

    def _flush(self, req: Request) -> None:
        """Preempted: copy its decode times out of the timeline; it stops decoding."""
        if req.timeline_start >= 0:
            count = req.num_output_tokens - len(req.token_times)
            req.token_times.extend(self.timeline.slice(req.timeline_start, count).tolist())
            req.timeline_start = -1
            self._num_decoding -= 1
            if self.gaps is not None:
                self.gaps.drop(req.request_id)

    def _finish(self, req: Request, now: float) -> None:
        complete = self.complete
        if complete is not None:  # token times only for a sink; ITLs went to the tally per step
            if req.timeline_start >= 0:
                self._num_decoding -= 1
            times = self._token_times(req) if self._wants_times else None
            self.outstanding_tokens -= req.prompt_tokens + req.max_output_tokens
            complete.add(req, now, times)
            return
        times = self._token_times(req)
        if req.timeline_start >= 0:
            self._num_decoding -= 1
        self.outstanding_tokens -= req.prompt_tokens + req.max_output_tokens
        self.emit(finished_record(req, req.first_scheduled_s, now, times), self.index)

    def _token_times(self, req: Request) -> np.ndarray:
        """Every token time of a finishing request: explicit ones, then its timeline slice."""
        explicit = req.token_times
        if req.timeline_start >= 0:
            k = len(explicit)
            count = req.num_output_tokens - k
            times = np.empty(k + count)
            times[:k] = explicit
            times[k:] = self.timeline.slice(req.timeline_start, count)
            return times
        return np.asarray(explicit, dtype=np.float64)
