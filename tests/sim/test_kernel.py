"""Event kernel ordering and the per-replica step timeline."""

import numpy as np
import pytest

from infercast.sim.kernel import Kernel
from infercast.sim.timeline import Timeline


def test_events_run_by_time_then_priority_then_insertion():
    k = Kernel()
    out = []
    k.at(2.0, 0, out.append, "late")
    k.at(1.0, 1, out.append, "step-end")
    k.at(1.0, 0, out.append, "arrival-1")
    k.at(1.0, 0, out.append, "arrival-2")
    gone = k.at(1.5, 0, out.append, "cancelled")
    k.cancel(gone)
    k.run()
    assert out == ["arrival-1", "arrival-2", "step-end", "late"]
    assert k.now == 2.0 and k.num_events == 4
    with pytest.raises(ValueError, match="past"):
        k.at(1.0, 0, out.append, "x")


def test_two_kernels_share_nothing():
    a, b = Kernel(), Kernel()
    a.at(5.0, 0, lambda: None)
    a.run()
    assert b.now == 0.0 and not b.heap and b.num_events == 0


def test_timeline_slices_survive_compaction():
    tl = Timeline()
    tl.extend(np.arange(10.0).tolist())
    tl.append(10.0)
    assert tl.size() == 11 and tl.slice(3, 4).tolist() == [3.0, 4.0, 5.0, 6.0]
    tl.drop_before(5)
    assert len(tl) == 6 and tl.slice(5, 3).tolist() == [5.0, 6.0, 7.0]
    with pytest.raises(IndexError):
        tl.slice(2, 2)


def test_time_series_says_when_a_replica_may_skip_observing():
    """observe returns (last sample, interval); a call skipped while now - last < interval
    changes nothing."""
    from types import SimpleNamespace

    from infercast.sim.series import TimeSeries

    rep = SimpleNamespace(index=0, sched=SimpleNamespace(waiting=(), num_preemptions=0))
    ts = TimeSeries(max_points=4, interval_s=1.0)
    assert ts.observe(0.0, rep, 3, 0.5) == (0.0, 1.0)
    assert ts.observe(0.5, rep, 3, 0.5) == (0.0, 1.0)  # too soon: not sampled
    last, interval = ts.observe(1.0, rep, 3, 0.5)
    assert (last, interval) == (1.0, 1.0) and ts.arrays()["time_s"].tolist() == [0.0, 1.0]
    for t in (2.0, 3.0):  # the 4th point decimates to every other one and doubles the interval
        last, interval = ts.observe(t, rep, 3, 0.5)
    assert interval == 2.0 and ts.arrays()["time_s"].tolist() == [0.0, 2.0]
    assert ts.arrays()["kv_usage"].tolist() == [0.5, 0.5]


def test_run_merges_an_arrival_stream_with_the_heap_arrivals_first_at_equal_times():
    """Same-instant arrivals before a heap event; a cancelled and reposted event; events counted;
    ``after_arrivals`` waits for the arrivals of its instant only (then runs after the step end
    queued at that instant, as an event of its own)."""
    from types import SimpleNamespace

    k = Kernel()
    out = []
    pending = []

    def step_end():
        out.append(("step", k.now, k.arrival_s))
        if k.now < 2.0:
            pending.append(k.at(3.5, 1, step_end))  # cut below by the arrival at 2.0

    def arrive(item):
        out.append((item.name, k.now, k.arrival_s))
        k.after_arrivals(lambda: out.append(("kick", item.name, k.now)))
        if item.name == "c":
            k.cancel(pending.pop())
            k.at(2.5, 1, step_end)

    k.at(1.0, 1, step_end)
    items = [
        SimpleNamespace(arrival_s=t, name=name)
        for t, name in [(1.0, "a"), (1.0, "b"), (2.0, "c"), (4.0, "d")]
    ]
    k.run(iter(items), arrive)
    inf = float("inf")
    assert out == [
        ("a", 1.0, 1.0),
        ("b", 1.0, 2.0),
        ("kick", "b", 1.0),
        ("step", 1.0, 2.0),
        ("kick", "a", 1.0),
        ("c", 2.0, 4.0),
        ("kick", "c", 2.0),
        ("step", 2.5, 4.0),
        ("d", 4.0, inf),
        ("kick", "d", 4.0),
    ]
    assert k.num_events == 7 and k.now == 4.0 and k.arrival_s == inf
    with pytest.raises(ValueError, match="time order"):
        Kernel().run(iter(items[2::-2]), lambda item: None)
