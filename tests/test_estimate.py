"""The seed's table, reproduced by the floor, and its missing out-of-memory verdict."""

from __future__ import annotations

import pytest

from infercast.estimate import estimate
from infercast.units import GB

H100_BW = 3.35e12
KV_PER_TOKEN = 163_840  # 2 * 80 * 8 * 128 * 1 byte


@pytest.fixture(scope="module")
def seed():
    return estimate(
        "llama-3.1-70b",
        "h100-sxm",
        weights="fp8",
        kv_cache="fp8",
        batches=(1, 8, 32, 64),
        context=2048,
        prompt=1024,
    )


def test_seed_formula_with_round_params():
    # The seed: step = (70e9 * 1 + kv/token * context * batch) / bandwidth.
    expected_ms = {1: 21.00, 8: 21.70, 32: 24.10, 64: 27.31}
    expected_tok_s = {1: 48, 8: 369, 32: 1328, 64: 2344}
    for b, ms in expected_ms.items():
        step = (70e9 + KV_PER_TOKEN * 2048 * b) / H100_BW
        assert step * 1e3 == pytest.approx(ms, abs=0.006)
        assert b / step == pytest.approx(expected_tok_s[b], abs=1)


def test_seed_formula_column_uses_real_params(seed):
    for d, ms in zip(seed.decode, (21.16, 21.86, 24.27, 27.47), strict=True):
        assert d.seed_formula_time_s * 1e3 == pytest.approx(ms, abs=0.006)


def test_floor_reproduces_seed_up_to_embedding_gather(seed):
    # The finer ledger reads only the gathered embedding rows, not the 1.05B-param table.
    emb_table_s = seed.model.embedding_params * 1.0 / H100_BW
    for d in seed.decode:
        assert d.floor_step_time_s == pytest.approx(d.seed_formula_time_s - emb_table_s, rel=1e-3)
        gather = next(o for o in d.cost.ops if o.op.name == "embedding gather")
        assert gather.op.compulsory_bytes == d.batch * 8192 * 1.0  # one row per token
        assert d.floor_step_time_s <= d.step_time_s


def test_seed_case_memory_verdict(seed):
    by_batch = {d.batch: d for d in seed.decode}
    assert by_batch[1].fits and by_batch[8].fits
    assert not by_batch[64].fits
    # weights + KV alone: 70.55 GB + 64 * 2048 * 163,840 B = 92.0 GB ("about 92 GB needed").
    mem = seed.step_model.memory
    assert mem.weight_bytes + mem.kv_bytes(64, 2048) == pytest.approx(92.03 * GB, rel=1e-3)
    assert by_batch[64].required_bytes > 80 * GB
    d = seed.to_dict()
    assert d["memory"]["fits"] is False and d["memory"]["suggestions"]


def test_seed_case_is_memory_bound_and_attention_is_itemized(seed):
    for d in seed.decode:
        assert d.cost.bound == "memory"
        names = {o.op.name for o in d.cost.ops}
        assert {
            "attention (cached KV)",
            "attention (new tokens)",
            "embedding gather",
            "lm_head",
        } <= names
        attn = next(o for o in d.cost.ops if o.op.name == "attention (cached KV)")
        # GQA: the KV read is 8 kv heads' worth, once per sequence per step.
        assert attn.op.compulsory_bytes == pytest.approx(d.batch * 2047 * KV_PER_TOKEN)


def test_estimate_takes_a_request_or_its_fields_alike():
    from infercast.estimate import EstimateRequest, estimate

    request = EstimateRequest(
        "llama-3.1-8b", "h100-sxm", weights="bf16", batches=(1, 8), context=1024
    )
    by_request, by_fields = (
        estimate(request),
        estimate("llama-3.1-8b", "h100-sxm", weights="bf16", batches=(1, 8), context=1024),
    )
    assert by_request.to_dict() == by_fields.to_dict()
    assert estimate(request, batches=(4,)).decode[0].batch == 4
