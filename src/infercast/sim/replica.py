"""One model replica: schedule -> cost model step time -> advance, on the event kernel.

The replica owns a :class:`~infercast.sched.Scheduler` (the same one the CPU
engine uses) and a *step timer* (``infercast.cost.step.StepModel`` or any
object with ``step_time_s(new, cached)``, ``decode_affine(n)`` and
``affine_context_limit``). Two modes:

- exact (``fast=False``): one kernel event per model step, the reference.
- fast: when the scheduler says the next ``k`` steps are the same all-decode
  batch (:meth:`Scheduler.decode_horizon`), they become one *segment*: step j
  of n sequences whose contexts sum to S0 takes ``a + b*(S0 + n*j)`` seconds
  (``StepModel.decode_affine``), so the end time of step j (1-based) is
  ``t0 + j*(a + b*S0) + b*n*j*(j-1)/2`` in closed form. An arrival routed here
  mid-segment cuts it at the first step end at or after the arrival, which is
  exactly when the exact mode would first see it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from infercast.metrics.records import RequestRecord
from infercast.sched import Request, RequestStatus, Scheduler
from infercast.sim.collect import Completions, GapTally, finished_record, rejected_record
from infercast.sim.kernel import PRIO_ARRIVAL, PRIO_KICK, PRIO_STEP_END, Kernel
from infercast.sim.timeline import Timeline

# Enum members read through the class cost ~60 ns each (EnumType lookup); module constants ~15.
_RUNNING = RequestStatus.RUNNING


# Timeline entries held before the first compaction (then the threshold doubles).
TIMELINE_COMPACT_MIN = 1 << 16


@dataclass(slots=True)
class _Segment:
    """k all-decode steps in closed form; step j (1-based) ends at ``end(j)``."""

    start_s: float
    c1: float  # a + b*S0
    c2: float  # b*n/2
    steps: int  # steps it will run (may be cut by an arrival)
    handle: list | None
    num_seqs: int

    def end(self, j: int) -> float:
        return self.start_s + j * self.c1 + self.c2 * (j * (j - 1))

    def ends(self, m: int) -> list[float] | np.ndarray:
        """End times of steps 1..m (same arithmetic as :meth:`end`; a list when short)."""
        s, c1, c2 = self.start_s, self.c1, self.c2
        if m <= 32:  # segments are mostly a few steps long (cut by arrivals): numpy costs more
            return [s + j * c1 + c2 * (j * (j - 1)) for j in range(1, m + 1)]
        j = np.arange(1, m + 1, dtype=np.float64)
        return s + j * c1 + c2 * (j * (j - 1))

    def first_end_after(self, t: float) -> int:
        """Smallest j in [1, steps] with end(j) >= t (root of the quadratic, then checked)."""
        c1, c2, dt = self.c1, self.c2, t - self.start_s
        if c2 > 0:
            lin = c1 - c2
            j = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * c2 * dt)) / (2.0 * c2))
        else:
            j = math.ceil(dt / c1)
        steps, s0 = self.steps, self.start_s
        if j < 1:  # ``min(max(j, 1), steps)`` without the calls
            j = 1
        elif j > steps:
            j = steps
        while j > 1 and s0 + (j - 1) * c1 + c2 * ((j - 1) * (j - 2)) >= t:  # end(j - 1) >= t
            j -= 1
        while j < steps and s0 + j * c1 + c2 * (j * (j - 1)) < t:  # end(j) < t
            j += 1
        return j


def _step_arrays(batch) -> tuple[np.ndarray, np.ndarray]:
    """(new tokens, cached tokens) per sequence of a batch, for the cost model.

    A compact decode group of n requests whose contexts sum to S enters as n
    one-token decodes of S/n each: with full attention the cost model sees
    decode contexts only through their sum, so equal shares cost the same.
    """
    seqs, nd = batch.seqs, batch.num_decode_seqs
    k = len(seqs)
    new = np.empty(k + nd)
    cached = np.empty(k + nd)
    for i, seq in enumerate(seqs):
        new[i] = seq.num_new_tokens
        cached[i] = seq.num_cached_tokens
    if nd:
        new[k:] = 1.0
        cached[k:] = batch.decode_cached_tokens / nd
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
        self.num_steps += steps
        self.busy_s += duration_s
        self.seq_time_s += num_seqs * duration_s
        self.kv_time_s += kv_usage * duration_s
        self.peak_kv_usage = max(self.peak_kv_usage, kv_usage)


class Replica:
    """A scheduler plus a step timer driven by the kernel (see module doc)."""

    def __init__(
        self,
        index: int,
        scheduler: Scheduler,
        timer,
        kernel: Kernel,
        emit: Callable[[RequestRecord, int], None],
        fast: bool = True,
        max_segment_steps: int = 4096,
        observe: Callable[[float, Replica, int], tuple[float, float]] | None = None,
        complete: Completions | None = None,
        itl: Callable[[np.ndarray, np.ndarray], None] | None = None,
    ):
        self.index = index
        self.sched = scheduler
        self.timer = timer
        self.kernel = kernel
        self.emit = emit  # (record, replica index) for every finished or rejected request
        # Completed requests go to ``complete`` (no record) and their ITL values, per step, to ``itl``
        # (both or neither; then every finished request is a record through ``emit``).
        self.complete = complete
        self._complete_add = complete.add if complete is not None else None
        self._wants_times = complete is not None and complete.wants_times  # fixed for the run
        self.gaps = GapTally(itl) if complete is not None else None
        self.fast = fast
        self.max_segment_steps = max_segment_steps
        self.observe = observe  # returns (last sample, interval): see TimeSeries.observe
        # A lower bound of when the time series' next sample can be due: ``observe`` samples when
        # ``now - last >= interval`` and returns (last, interval), the interval only growing, so every
        # such ``now`` is >= (last + interval) * (1 - 1e-12) (times are >= 0; the margin dwarfs the
        # subtraction's rounding). A step before it skips the call; after it, ``observe`` decides.
        self._obs_due = -math.inf if observe is not None else math.inf
        self.timeline = Timeline()
        self._compact_at = TIMELINE_COMPACT_MIN
        self.stats = ReplicaStats()
        self.outstanding_tokens = 0  # prompt + max output of requests here, for routing
        self._busy = False
        self._kicked = False
        self._batch: Any = None  # the step under way: a Batch ((Batch, verify) in SpecReplica)
        self._segment: _Segment | None = None  # the segment under way (``_seg``), else None
        self._seg = _Segment(0.0, 0.0, 0.0, 0, None, 0)  # refilled per segment: one object per replica
        self._num_decoding = 0
        self._affine: dict[int, tuple[float, float]] = {}
        self._context_limit = float(getattr(timer, "affine_context_limit", float("inf")))
        self._windowed = self._context_limit != float("inf")
        self._mixed = getattr(timer, "mixed_step_time_s", None)
        self._chunk = getattr(timer, "chunk_step_time_s", None)  # ``mixed`` of one listed sequence
        # A host KV tier's reloads (cost/kv_tier.KvReload): the step waits for the blocks copied back.
        self._reload = getattr(timer, "kv_reload", None) if scheduler.kv.host_tier is not None else None
        # Event callbacks bound once (reading ``self._end_step`` builds a bound method every time).
        self._on_step_end, self._on_segment_end = self._end_step, self._end_segment
        self._on_single_end = self._end_single
        # Under ``Kernel.run_one`` (``solo``: the only replica, open loop) the replica's one pending
        # event is these two fields instead of a heap entry (see there).
        self.solo = False
        self.next_s = math.inf
        self.next_fn: Callable[[], None] | None = None

    # ---- arrivals ---------------------------------------------------------------
    def submit(self, req: Request) -> None:
        """A request arrives now (kernel time)."""
        now = self.kernel.now
        if not self.sched.add_request(req):
            self.emit(rejected_record(req, now, req.reject_reason), self.index)
            return
        self.outstanding_tokens += req.prompt_tokens + req.max_output_tokens
        seg = self._segment
        if seg is not None:  # a segment under way: cut it at its first step end >= now
            m = seg.first_end_after(now)
            if m < seg.steps:
                seg.steps = m
                end = seg.start_s + m * seg.c1 + seg.c2 * (m * (m - 1))  # ``seg.end(m)``, inlined
                if self.solo:  # its pending end moves
                    self.next_s = end
                else:
                    seg.handle[3] = None  # ``Kernel.cancel(seg.handle)``, inlined
                    seg.handle = self.kernel.at(end, PRIO_STEP_END, self._on_segment_end)
        elif not self._busy:
            self._kick(now)

    def _kick(self, now: float) -> None:
        """Start the next step now, but after every arrival of this same instant is queued."""
        if self._kicked:
            return
        self._kicked = True
        kernel = self.kernel  # ``kernel.has_pending(now, PRIO_ARRIVAL)``, inlined
        heap = kernel.heap
        if kernel.arrival_s == now or (heap and heap[0][0] == now and heap[0][1] <= PRIO_ARRIVAL):
            self._post_kick(now)
        else:  # no same-instant arrival can still come: skip the extra event
            self._start_step()

    def _post_kick(self, now: float) -> None:
        """Start the next step after this instant's arrivals (a kick event)."""
        if self.solo:
            self.next_s, self.next_fn = now, self._start_step
        else:
            self.kernel.at(now, PRIO_KICK, self._start_step)

    # ---- stepping ---------------------------------------------------------------
    def _start_step(self) -> None:
        self._kicked = False
        now = self.kernel.now
        sched = self.sched
        if self.fast:
            k = sched.decode_horizon(self.max_segment_steps)
            if k and self._windowed:
                k = self._cap_by_context(k)
            if k >= 2:
                self._start_segment(now, k)
                return
            if k:  # one group-only step (a member finishes after it): no batch, no cost-model call
                self._start_single(now)
                return
        batch = sched.schedule()
        seqs, nd = batch.seqs, batch.num_decode_seqs
        if not seqs and not nd:
            self._busy = False
            return
        for rid in batch.preempted:
            self._flush(sched.requests[rid])
        if len(seqs) == 1 and self._chunk is not None:  # one prefill chunk beside the group: no lists
            seq = seqs[0]
            req = seq.req
            if req.first_scheduled_s is None:
                req.first_scheduled_s = now
            dt = self._chunk(nd, batch.decode_cached_tokens, seq.num_new_tokens, seq.num_cached_tokens)
        else:
            new: list[int] = []
            cached: list[int] = []
            for seq in seqs:
                req = seq.req
                if req.first_scheduled_s is None:
                    req.first_scheduled_s = now
                new.append(seq.num_new_tokens)
                cached.append(seq.num_cached_tokens)
            mixed = self._mixed
            if mixed is not None:  # a StepModel: the batch as sums, no arrays
                dt = mixed(nd, batch.decode_cached_tokens, new, cached)
            else:
                dt = self.timer.step_time_s(*_step_arrays(batch))
        if self._reload is not None:
            dt = self._reload.step_time_s(dt, sched.kv.host_tier.take_loaded())
        num_seqs = len(seqs) + nd
        kv = sched.kv  # ``self._account(1, dt, num_seqs)``, inlined
        usage = (kv.num_blocks - kv.num_free_blocks) / kv.num_blocks
        st = self.stats
        st.num_steps += 1
        st.busy_s += dt
        st.seq_time_s += num_seqs * dt
        st.kv_time_s += usage * dt
        if usage > st.peak_kv_usage:
            st.peak_kv_usage = usage
        if now >= self._obs_due:  # else ``observe`` would ignore the call (see ``_obs_due``)
            last, interval = self.observe(now, self, num_seqs)
            self._obs_due = (last + interval) * (1.0 - 1e-12)
        self._busy = True
        self._batch = batch
        if self.solo:
            self.next_s, self.next_fn = now + dt, self._on_step_end
        else:
            self.kernel.at(now + dt, PRIO_STEP_END, self._on_step_end)

    def _end_step(self) -> None:
        now = self.kernel.now
        batch, self._batch = self._batch, None
        gaps = self.gaps
        decoding_in_step = batch.num_decode_seqs
        started: list[Request] = []
        for seq in batch.seqs:
            req = seq.req
            if req.timeline_start >= 0:
                decoding_in_step += 1
            elif seq.samples:
                times = req.token_times
                if times and gaps is not None:  # first token after a recompute
                    gaps.explicit(now - times[-1])
                times.append(now)  # first token (or first after a recompute)
                started.append(req)
        if decoding_in_step:
            if decoding_in_step != self._num_decoding:
                raise RuntimeError("a step ran only some decoding requests; timeline would be wrong")
            if gaps is not None:
                vals = gaps.vals
                if gaps.off or len(vals) >= 65_535:
                    gaps.entry(now, decoding_in_step)
                else:  # ``gaps.entry(now, decoding_in_step)``, inlined: no flush is due after it
                    vals.append(now - gaps.last)
                    gaps.counts.append(decoding_in_step)
                    gaps.last = now
            data = self.timeline.data  # ``timeline.append(now)``; compaction keeps the list object
            if len(data) >= self._compact_at:
                self._compact(1)
            data.append(now)
        done = self.sched.update(batch)
        if started:
            tl = self.timeline
            size = tl.base + len(tl.data)  # ``tl.size``
            for req in started:
                if req.status is _RUNNING:  # not finished by this step
                    req.timeline_start = size
                    self._num_decoding += 1
                    if not decoding_in_step and gaps is not None:  # its token is not on the timeline
                        gaps.off[req.request_id] = now
        for req in done:
            self._finish(req, now)
        # ``_kick(now)``, inlined (no kick is pending at a step's end: one waits only while idle)
        kernel = self.kernel
        heap = kernel.heap
        if kernel.arrival_s == now or (heap and heap[0][0] == now and heap[0][1] <= PRIO_ARRIVAL):
            self._kicked = True
            self._post_kick(now)
        else:
            self._start_step()

    def _start_single(self, now: float) -> None:
        """The group's next step alone (``decode_horizon`` said 1), as ``schedule()`` and the step
        path would run it (the group step's KV blocks first, then the statistics and the time series,
        the same event), but timed by the affine form, ``a + b*S0`` (equal to the cost model's
        mixed step within ~1e-12 relative), and ended by :meth:`_end_single` without a ``Batch``."""
        sched = self.sched
        sched.start_group_step()  # its new blocks: the horizon says they fit, and nothing is admitted
        n = len(sched.group)
        ab = self._affine.get(n)
        if ab is None:
            ab = self._affine[n] = self.timer.decode_affine(n)
        dt = ab[0] + ab[1] * (sched._dsum + n * sched.dstep)  # ``group_context_tokens``
        kv = sched.kv  # ``self._account(1, dt, n)``, inlined
        usage = (kv.num_blocks - kv.num_free_blocks) / kv.num_blocks
        st = self.stats
        st.num_steps += 1
        st.busy_s += dt
        st.seq_time_s += n * dt
        st.kv_time_s += usage * dt
        if usage > st.peak_kv_usage:
            st.peak_kv_usage = usage
        if now >= self._obs_due:  # else ``observe`` would ignore the call (see ``_obs_due``)
            last, interval = self.observe(now, self, n)
            self._obs_due = (last + interval) * (1.0 - 1e-12)
        self._busy = True
        if self.solo:
            self.next_s, self.next_fn = now + dt, self._on_single_end
        else:
            self.kernel.at(now + dt, PRIO_STEP_END, self._on_single_end)

    def _end_single(self) -> None:
        """End of :meth:`_start_single`'s step: ``_end_step`` of a batch that is the group alone."""
        now = self.kernel.now
        n = self._num_decoding  # every decoding request is in the group and ran
        gaps = self.gaps
        if gaps is not None:
            vals = gaps.vals
            if gaps.off or len(vals) >= 65_535:
                gaps.entry(now, n)
            else:  # ``gaps.entry(now, n)``, inlined: no flush is due after it
                vals.append(now - gaps.last)
                gaps.counts.append(n)
                gaps.last = now
        data = self.timeline.data  # ``timeline.append(now)``; compaction keeps the list object
        if len(data) >= self._compact_at:
            self._compact(1)
        data.append(now)
        for req in self.sched.end_group_step():
            self._finish(req, now)
        # ``_kick(now)``, inlined (no kick is pending at a step's end: one waits only while idle)
        kernel = self.kernel
        heap = kernel.heap
        if kernel.arrival_s == now or (heap and heap[0][0] == now and heap[0][1] <= PRIO_ARRIVAL):
            self._kicked = True
            self._post_kick(now)
        else:
            self._start_step()

    def _start_segment(self, now: float, k: int) -> None:
        sched = self.sched
        group = sched.group
        n = len(group)
        s0 = sched._dsum + n * sched.dstep  # ``group_context_tokens``
        ab = self._affine.get(n)
        if ab is None:
            ab = self._affine[n] = self.timer.decode_affine(n)
        a, b = ab
        # Step j (1-based) ends at t0 + j*c1 + c2*j*(j-1): sum of a + b*(S0 + n*i), i < j.
        c1, c2 = a + b * s0, b * n * 0.5
        seg = self._seg  # no segment is under way: refill it (a construction costs ~5x these stores)
        seg.start_s, seg.c1, seg.c2, seg.steps, seg.num_seqs = now, c1, c2, k, n
        if self.solo:
            self.next_s, self.next_fn = now + k * c1 + c2 * (k * (k - 1)), self._on_segment_end  # end(k)
        else:
            seg.handle = self.kernel.at(now + k * c1 + c2 * (k * (k - 1)), PRIO_STEP_END, self._on_segment_end)
        self._segment = seg
        self._busy = True
        self.stats.num_segments += 1
        if now >= self._obs_due:  # else ``observe`` would ignore the call (see ``_obs_due``)
            last, interval = self.observe(now, self, n)
            self._obs_due = (last + interval) * (1.0 - 1e-12)

    def _end_segment(self) -> None:
        now = self.kernel.now
        seg, self._segment = self._segment, None
        m, n = seg.steps, seg.num_seqs
        kv, dt = self.sched.kv, now - seg.start_s  # ``self._account(m, dt, n)``, inlined
        usage = (kv.num_blocks - kv.num_free_blocks) / kv.num_blocks
        st = self.stats
        st.num_steps += m
        st.busy_s += dt
        st.seq_time_s += n * dt
        st.kv_time_s += usage * dt
        if usage > st.peak_kv_usage:
            st.peak_kv_usage = usage
        tl = self.timeline
        if len(tl.data) + m > self._compact_at:
            self._compact(m)
        gaps = self.gaps
        if m <= 32:  # ``seg.ends(m)`` and ``tl.extend(ends)`` without the calls
            s0, c1, c2 = seg.start_s, seg.c1, seg.c2
            ends: Any  # this list, or seg.ends()'s array below
            ends = []  # a loop, not a list comprehension: in 3.11 that builds and calls a function
            if gaps is not None and not gaps.off and len(gaps.vals) < 65_535:
                # ``gaps.entries(ends, n)`` in the same loop: each step's gap to the one before,
                # n times (the same counts and flush points; ``off`` empty: none alone). After the
                # first, step j's gap is ``c1 + 2*c2*(j - 1)`` in closed form and its end the previous
                # end plus that gap: ~10 bytecodes less per step than the closed form of each end, equal
                # to it within a few ulps of the time (m <= 32 additions; within 1e-9 relative,
                # ``benchmarks/sim_fingerprint.py --compare``).
                vals, counts = gaps.vals, gaps.counts
                t = s0 + c1
                ends.append(t)
                vals.append(t - gaps.last)
                counts.append(n)
                c22 = c2 + c2
                d = c1 + c22
                for _ in range(m - 1):
                    t += d
                    ends.append(t)
                    vals.append(d)
                    counts.append(n)
                    d += c22
                gaps.last = t
                gaps = None  # done
            else:
                for j in range(1, m + 1):
                    ends.append(s0 + j * c1 + c2 * (j * (j - 1)))
            tl.data.extend(ends)
        else:
            ends = seg.ends(m)
            tl.extend(ends)
        if gaps is not None:
            gaps.entries(ends, n)
        done = self.sched.advance_decode(m)
        for req in done:
            self._finish(req, now)
        # ``_kick(now)``, inlined (no kick is pending at a step's end: one waits only while idle)
        kernel = self.kernel
        heap = kernel.heap
        if kernel.arrival_s == now or (heap and heap[0][0] == now and heap[0][1] <= PRIO_ARRIVAL):
            self._kicked = True
            self._post_kick(now)
        else:
            self._start_step()

    def _cap_by_context(self, k: int) -> int:
        s = self.sched
        longest = max(r.num_computed_tokens + s.dstep - r.dbase for r in s.group.values())
        return max(0, min(k, int(self._context_limit) - longest))

    # ---- per-request records ----------------------------------------------------
    def _append_time(self, t: float) -> None:
        if self.timeline.held >= self._compact_at:
            self._compact(1)
        self.timeline.append(t)

    def _compact(self, extra: int) -> None:
        """Drop timeline entries no active request needs (amortized: the threshold doubles)."""
        tl = self.timeline
        starts = [r.timeline_start for r in self.sched.running.values() if r.timeline_start >= 0]
        tl.drop_before(min(starts) if starts else tl.size)
        self._compact_at = max(TIMELINE_COMPACT_MIN, 2 * (tl.held + extra))

    def _flush(self, req: Request) -> None:
        """Preempted: copy its decode times out of the timeline; it stops decoding."""
        if req.timeline_start >= 0:
            count = req.num_output_tokens - len(req.token_times)
            req.token_times.extend(self.timeline.slice(req.timeline_start, count).tolist())
            req.timeline_start = -1
            self._num_decoding -= 1
            if self.gaps is not None:
                self.gaps.off.pop(req.request_id, None)

    def _finish(self, req: Request, now: float) -> None:
        add = self._complete_add
        if add is not None:  # token times only for a sink; ITLs went to the tally per step
            if req.timeline_start >= 0:
                self._num_decoding -= 1
            times = self._token_times(req) if self._wants_times else None
            self.outstanding_tokens -= req.prompt_tokens + req.max_output_tokens
            add(req, req.first_scheduled_s, req.token_times[0], now, times)
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
