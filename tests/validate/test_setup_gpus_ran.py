"""Rows whose imported GPU count counts the GPUs twice (``extra.n_gpus_ran``,
``benchmarks/annotate_inferencex.py``): ``validate/setup.py`` runs the GPUs the run used."""

from __future__ import annotations

from infercast.validate.setup import layout


def _dsr1(concurrency_row, **kw):
    base = dict(
        model="deepseek-r1", hardware="b200", engine="sglang-0.5.9", weights="fp4", concurrency=64
    )
    return concurrency_row(**(base | kw))


def test_tp_stated_as_the_doubled_count_runs_the_twins_tp(concurrency_row):
    # AIC-0412 (n_gpus 64, tp 64, ep 8) measures what AIC-1969 (8 GPUs, tp 8, ep 8) measures
    doubled = layout(_dsr1(concurrency_row, n_gpus=64, tp=64, ep=8, extra={"n_gpus_ran": 8}))
    twin = layout(_dsr1(concurrency_row, n_gpus=8, tp=8, ep=8))
    assert doubled.setup == twin.setup
    assert (doubled.replicas, doubled.num_gpus) == (twin.replicas, twin.num_gpus) == (1, 8)
    assert any("counts the GPUs twice" in n for n in doubled.notes)


def test_attention_dp_stated_as_the_doubled_count_runs_one_replica(concurrency_row):
    # AIC-4620 (n_gpus 64, tp 1, ep 8, dp 64) measures what AIC-2739 (8 GPUs, tp 1, ep 8) measures
    kw = dict(engine="trtllm-1.2.0rc6.post3", weights="fp8", concurrency=256, tp=1, ep=8)
    doubled = layout(_dsr1(concurrency_row, n_gpus=64, dp=64, extra={"n_gpus_ran": 8}, **kw))
    twin = layout(_dsr1(concurrency_row, n_gpus=8, dp=8, **kw))
    assert doubled.setup == twin.setup and doubled.setup.attn_dp
    assert doubled.replicas == twin.replicas == 1


def test_without_the_key_the_stated_count_makes_replicas(concurrency_row):
    kw = dict(engine="trtllm-1.2.0rc6.post3", weights="fp8", tp=1, ep=8)
    assert layout(_dsr1(concurrency_row, n_gpus=64, dp=64, **kw)).replicas == 8
