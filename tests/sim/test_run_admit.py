"""A closed loop's requests behind the serving front end (EfficiencyProfile.request_admit_s):
each reaches the engine ``request_admit_s`` after the one before it, TTFT still from the send;
the first burst reaches the idle (parked) engine together, once all are admitted."""

from __future__ import annotations

import pytest
from tests.sim.helpers import run

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision

CFG = {
    "mode": "exact",
    "scheduler": {"policy": "chunked", "max_num_seqs": 8, "max_num_batched_tokens": 512},
    "workload": {
        "arrival": "closed",
        "concurrency": 4,
        "num_requests": 16,
        "input": {"dist": "fixed", "mean": 128},
        "output": {"dist": "fixed", "mean": 64},
    },
}


def _model(admit_s: float) -> StepModel:
    return StepModel(
        load_model("llama-3.1-8b"),
        load_hardware("h100-sxm"),
        Precision.parse("bf16"),
        profile=EfficiencyProfile(request_admit_s=admit_s),
    )


def test_default_sends_a_burst_to_the_engine_at_once():
    _, recs = run(_model(0.0), **CFG)
    first = sorted(recs, key=lambda r: r.arrival_s)[:4]
    assert {r.first_scheduled_s for r in first} == {0.0}
    assert len({r.chunk_times_s[0] for r in first}) == 1  # one prefill step for the four


def test_admission_staggers_later_bursts_and_keeps_ttft_from_the_send():
    admit = 1e-3
    _, recs = run(_model(admit), **CFG)
    recs = sorted(recs, key=lambda r: (r.arrival_s, r.first_scheduled_s))
    first = recs[:4]  # the first burst reaches the parked engine once all four are admitted
    assert [r.arrival_s for r in first] == [0.0] * 4  # sent at once
    assert [r.first_scheduled_s for r in first] == pytest.approx([4 * admit] * 4)
    assert len({r.chunk_times_s[0] for r in first}) == 1  # one prefill step for the four
    # they finish together; their successors reach an engine that looks for work at once
    second = sorted(recs[4:8], key=lambda r: r.first_scheduled_s)
    assert [r.arrival_s for r in second] == pytest.approx([first[0].finish_s] * 4)
    assert second[0].first_scheduled_s == pytest.approx(second[0].arrival_s + admit)  # alone
    assert second[1].first_scheduled_s > second[0].chunk_times_s[0] - 1e-12  # the rest after it
    assert len({r.chunk_times_s[0] for r in second[1:]}) == 1  # together in the next step
    # the early request's first decode waits for the others' prefill: TPOTs differ
    gaps = [r.chunk_times_s[1] - r.chunk_times_s[0] for r in second]
    assert gaps[0] > 1.2 * max(gaps[1:])
