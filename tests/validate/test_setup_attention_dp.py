"""TensorRT-LLM attention data parallel in ``validate/setup.py``: per-rank engine limits, and the
attention-DP context balance a row's recipe enabled (``extra.attention_dp_balance``)."""

from __future__ import annotations

import pytest

from infercast.errors import Unpredictable
from infercast.validate.setup import layout
from infercast.validate.simrun import _scheduler


def _adp_row(concurrency_row, **kw):
    base = dict(
        model="deepseek-r1",
        hardware="b200",
        engine="trtllm-1.2.0rc6.post2",
        weights="fp4",
        n_gpus=8,
        tp=1,
        ep=8,
        concurrency=128,
    )
    return concurrency_row(**(base | kw))


def test_trtllm_attention_dp_replica_holds_every_ranks_limits(concurrency_row):
    # PyExecutor._balance_adp_requests compares each rank's own counts with max_batch_size: each
    # of the 8 ranks has the preset's running limit and token budget
    adp = layout(_adp_row(concurrency_row)).setup
    tp8 = layout(_adp_row(concurrency_row, tp=8, ep=8)).setup
    assert adp.attn_dp and not tp8.attn_dp
    assert (adp.max_seqs, adp.max_batched_tokens) == (8 * tp8.max_seqs, 8 * tp8.max_batched_tokens)


def test_sglang_attention_dp_keeps_the_presets_totals(concurrency_row):
    adp = layout(_adp_row(concurrency_row, engine="sglang-0.5.9")).setup
    tp8 = layout(_adp_row(concurrency_row, engine="sglang-0.5.9", tp=8)).setup
    assert adp.attn_dp and adp.max_batched_tokens == tp8.max_batched_tokens


def test_recipe_balance_reaches_the_simulated_scheduler(concurrency_row):
    lay = layout(_adp_row(concurrency_row, extra={"attention_dp_balance": [60, 0]}))
    assert lay.setup.adp_balance == (60, 0)
    assert any("attention-DP balance" in n for n in lay.notes)
    sched = _scheduler(lay.setup)
    assert (sched["adp_ranks"], sched["adp_timeout_iters"], sched["adp_batching_wait_iters"]) == (
        8,
        60,
        0,
    )
    plain = _scheduler(layout(_adp_row(concurrency_row)).setup)
    assert "adp_ranks" not in plain  # off unless the run's recipe enabled it


@pytest.mark.parametrize("bad", [[60], [0, 0], [60, -1], "60,0", [60.0, 0]])
def test_bad_balance_annotation_is_unpredictable(concurrency_row, bad):
    with pytest.raises(Unpredictable, match="attention_dp_balance"):
        layout(_adp_row(concurrency_row, extra={"attention_dp_balance": bad}))
