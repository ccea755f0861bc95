"""SimStore: a repeated validate reuses stored simulations; any changed input misses."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.errors import ConfigError
from infercast.validate import simrun
from infercast.validate.evaluate import Evaluator
from infercast.validate.simstore import SimStore

from .test_evaluate import SMALL, _boom


def test_a_repeated_run_reads_the_store_and_simulates_nothing(
    tmp_path, monkeypatch, concurrency_row
):
    rows = [
        concurrency_row(**SMALL),
        concurrency_row(**SMALL | dict(id="R-1-ttft", metric="ttft_mean_s", value=0.05)),
    ]
    first = SimStore(tmp_path)
    want = Evaluator(rows, prefer_simulator=True, workers=1, store=first).predict(ProfileSet())
    assert (first.hits, first.misses) == (0, 1)  # the two rows share one simulation
    monkeypatch.setattr(simrun.SimTask, "__call__", _boom)  # any simulation now fails
    again = SimStore(tmp_path)
    got = Evaluator(rows, prefer_simulator=True, workers=1, store=again).predict(ProfileSet())
    assert (again.hits, again.misses) == (1, 0)
    assert [p.predicted for p in got] == [p.predicted for p in want]
    assert all(p.predicted is not None for p in got)


def test_the_key_covers_the_inputs_and_the_profile(tmp_path, concurrency_row):
    (plan,) = Evaluator([concurrency_row(**SMALL)], prefer_simulator=True).plans
    task, prof = plan.simulate, EfficiencyProfile()
    key = SimStore.key(task, prof)
    assert key == SimStore.key(task, EfficiencyProfile())  # the same inputs: the same key
    assert key != SimStore.key(task, replace(prof, mem_bw_eff=prof.mem_bw_eff * 0.9))
    other = replace(task, config=task.config.model_copy(update={"seed": 1}))
    assert key != SimStore.key(other, prof)


def test_a_store_that_cannot_be_a_directory_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="`root` .*give a writable directory"):
        SimStore(blocker / "sims")
