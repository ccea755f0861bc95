"""The per-tick ledger, and the fleet's two ways into it: records and completion scalars."""

import numpy as np
import pytest

from infercast.fleet import run as fleet_run
from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.ledger import Ledger
from infercast.fleet.load import DayLoad
from infercast.fleet.members import DisaggUnit
from infercast.fleet.run import FleetSpec
from infercast.metrics.records import RequestRecord
from infercast.sched import Scheduler
from infercast.sim.config import build_config
from infercast.sim.replica import Replica
from infercast.sim.workload import Trace


@pytest.mark.parametrize(
    "times, output",
    [
        ([1.5, 1.6, 1.7], 3),  # TTFT 0.5 s: at the limit, met
        ([1.5001, 1.6], 2),  # TTFT over the limit
        ([1.2, 1.5], 2),  # TPOT 0.3 s over 0.1
        ([1.2], 1),  # one token: no TPOT, met on TTFT
    ],
)
def test_completed_scalars_count_as_the_record_would(times, output):
    by_record, by_scalars = Ledger(60.0, 0.5, 0.1), Ledger(60.0, 0.5, 0.1)
    rec = RequestRecord("r", 1.0, 100, output, np.array(times), finish_s=times[-1])
    by_record.record(rec)
    tpot = (times[-1] - times[0]) / (output - 1) if output > 1 else None
    by_scalars.completed(times[-1], 100, output, times[0] - 1.0, tpot)
    assert by_record.totals() == by_scalars.totals()


@pytest.mark.parametrize("units", [False, True], ids=["replicas", "units"])
def test_a_fleet_day_is_the_same_through_records(units, monkeypatch):
    """The fleet takes completions as scalars (``_Finished``, ``_UnitFinished``); the same day
    with every completion a record (the path before them) reports the same day and ticks, to
    the bit."""
    disagg = {"disaggregation": {"decode": {"replicas": 2}}} if units else {}
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "weights": "bf16",
            "slo_ttft_s": 0.5,
            "slo_tpot_s": 0.03,
            "scheduler": {"max_model_len": 2048, "max_num_seqs": 16},
            **disagg,
        }
    )
    lengths = Trace("t", np.zeros(3), np.array([300, 600, 3000]), np.array([200, 400, 50]))
    load = DayLoad(np.concatenate([np.full(4, 3.0), np.full(6, 12.0)]), "test", lengths)
    rep = build_replica(cfg, load, 2.0, capacity_rps=4.0)
    pol = make_policy("reactive", rep, load, 60.0)
    spec = FleetSpec(rep.start_s, 1, column_cap=200)
    fast = run_day(rep, load, pol, spec)

    def via_records(self, index, sched_cfg, timer):
        return Replica(index, Scheduler(sched_cfg), timer, self.kernel, self._emit)

    def unit_via_records(self):
        return DisaggUnit(len(self.members), self.unit, self.kernel, self._emit)

    monkeypatch.setattr(fleet_run.FleetSim, "_replica", via_records)
    if units:
        monkeypatch.setattr(fleet_run.FleetSim, "_new_replica", unit_via_records)
    slow = run_day(rep, load, make_policy("reactive", rep, load, 60.0), spec)
    for d in (fast["day"], slow["day"]):
        d.pop("sim_cpu_s"), d.pop("sim_wall_s")
    assert fast["day"]["requests_completed"] > 1000 and fast["day"]["requests_rejected"] > 0
    assert 0 < fast["day"]["slo_attainment"] < 1
    assert fast["day"] == slow["day"] and fast["ticks"] == slow["ticks"]
