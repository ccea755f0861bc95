"""The replica's per-step ITL tally (``sim.collect.GapTally``) against per-request token gaps."""

import numpy as np

from infercast.sim.collect import GapTally
from infercast.sim.timeline import Timeline


def _tally():
    got: list[tuple[float, int]] = []

    def sink(vals, counts):
        got.extend(zip(vals.tolist(), counts.tolist(), strict=True))

    tl = Timeline()
    return tl, GapTally(sink, tl), got


def _expanded(pairs):
    return sorted(v for v, c in pairs for _ in range(c))


def test_gaps_come_from_the_timeline_with_late_starters_counted_alone():
    """a and b start off the timeline (a prefill-only step at 0.5), then decode; c starts off it
    at 2.5; d too, but is preempted before the next entry (no gap)."""
    tl, gaps, got = _tally()
    gaps.off("a", 0.5)
    gaps.off("b", 0.5)
    tl.append(1.0)
    gaps.counts.append(2)  # a, b: 0.5 each, alone (no gap from before the first entry)
    tl.append(2.0)
    gaps.counts.append(2)  # 1.0, seen by two
    gaps.off("c", 2.5)
    gaps.off("d", 2.5)
    gaps.drop("d")
    tl.append(3.25)
    gaps.counts.append(3)  # a, b: 1.25; c: 0.75
    gaps.flush()
    assert _expanded(got) == [0.5, 0.5, 0.75, 1.0, 1.0, 1.25, 1.25]
    assert (1.0, 2) in got and all(np.isfinite(v) for v, _ in got)


def test_flush_between_entries_keeps_a_pending_gap_for_the_next_entry():
    tl, gaps, got = _tally()
    gaps.off("a", 0.0)
    tl.append(1.0)
    gaps.counts.append(1)  # a's gap 1.0, counted alone
    gaps.off("b", 1.5)  # b's next token is the entry after the flush below
    gaps.flush()
    assert got == [(1.0, 1)]
    tl.append(2.0)
    gaps.counts.append(2)  # a: 1.0 regular; b: 0.5 alone
    gaps.explicit(0.125)
    gaps.flush()
    assert _expanded(got) == [0.125, 0.5, 1.0, 1.0]
    assert not gaps.counts and not gaps.pending and not gaps.vals


def test_a_request_off_the_timeline_twice_keeps_both_gaps():
    """Its first gap is owed to an entry the tally has not flushed yet when its second starts."""
    tl, gaps, got = _tally()
    gaps.off("a", 0.0)
    tl.append(1.0)
    gaps.counts.append(1)  # a: 1.0
    gaps.drop("a")  # preempted after that entry: the gap above stays
    gaps.off("a", 4.0)  # recomputed; its first token again off the timeline
    tl.append(5.0)
    gaps.counts.append(1)  # a: 1.0
    gaps.flush()
    assert _expanded(got) == [1.0, 1.0]
