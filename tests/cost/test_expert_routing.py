"""Skewed MoE routing and EPLB replicas (cost/expert_routing.py) against hand calculations."""

import pytest

from infercast.cost.expert_routing import ExpertRouting
from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision


def test_zipf_shares_and_round_robin_placement_by_hand():
    # i ** -1 over 4 experts: 1, 1/2, 1/3, 1/4 = 25/12 -> shares 12/25, 6/25, 4/25, 3/25
    r = ExpertRouting.zipf(4, 1.0)
    assert r.shares == pytest.approx((12 / 25, 6 / 25, 4 / 25, 3 / 25))
    # dealt by popularity over 2 ranks: {0, 2} = 16/25, {1, 3} = 9/25; k = 1
    assert r.imbalance(1, 2) == pytest.approx(16 / 25 * 2)
    touched, rows = r.rank_load(10, 1, 2)
    assert rows == pytest.approx(10 * 16 / 25)
    assert touched == pytest.approx((1 - (13 / 25) ** 10) + (1 - (21 / 25) ** 10))


def test_a_token_picks_an_expert_at_most_once():
    r = ExpertRouting((0.7, 0.1, 0.1, 0.1))
    # k = 2: expert 0 capped at 1, the other pick spread over the rest in proportion
    assert r.selection_probs(2) == pytest.approx((1.0, 1 / 3, 1 / 3, 1 / 3))
    assert sum(r.selection_probs(2)) == pytest.approx(2)


def test_eplb_replicates_the_hot_expert_and_packs_by_hand():
    loads = (0.4, 0.2, 0.2, 0.2)
    plain = ExpertRouting(loads)  # ids kept: contiguous map {0, 1} {2, 3} -> 0.6 vs 0.4
    assert plain.imbalance(1, 2) == pytest.approx(1.2)
    # 2 redundant slots: expert 0 gets both (0.4/2 = 0.2 ties the others, first index wins, then
    # 0.4/3); replicas 0.2 (1), 0.2 (2), 0.2 (3), 0.1333 x3 packed heaviest first on the lighter
    # rank with room (3 slots each): r0 = 1, 3, 0 -> 0.5333; r1 = 2, 0, 0 -> 0.4667
    eplb = ExpertRouting(loads, redundant=2)
    assert eplb.imbalance(1, 2) == pytest.approx((0.2 + 0.2 + 0.4 / 3) * 2)


def test_uneven_slots_are_refused():
    with pytest.raises(ConfigError, match="multiple of 2"):
        ExpertRouting((1, 1, 1, 1), redundant=1).placement(2)
    with pytest.raises(ConfigError, match="Zipf exponent"):
        ExpertRouting.zipf(4, -1)


def _sm(routing, ep=8):
    return StepModel(
        load_model("qwen3-30b-a3b"),
        load_hardware("h100-sxm"),
        Precision.parse("bf16", None),
        Parallelism(tp=8, ep=ep, attn_dp=True),
        routing=routing,
    )


def test_zero_skew_is_the_uniform_model():
    uniform, zipf0 = _sm(None), _sm(ExpertRouting.zipf(128, 0.0))
    for batch in (1, 16, 256):
        assert zipf0.decode_cost(batch, 1000).time_s == pytest.approx(
            uniform.decode_cost(batch, 1000).time_s, rel=1e-12
        )


def test_the_busiest_rank_sets_the_expert_gemm_flops():
    routing = ExpertRouting.zipf(128, 1.0)
    sm = _sm(routing)
    t = 4096
    _, rank_rows = routing.rank_load(t, 8, 8)
    op = next(o for o in sm.prefill_cost(t).ops if o.op.name == "moe.experts.down")
    # down: 2 * rows * f * h per GPU of the busiest rank (its experts whole: tp / ep = 1), 48 layers
    assert op.op.flops == pytest.approx(2 * rank_rows * 768 * 2048 * 48)
    assert routing.imbalance(8, 8) > 1.2  # the skew is real: the hottest rank carries more
    assert sm.prefill_cost(t).time_s > _sm(None).prefill_cost(t).time_s


def test_redundant_experts_cost_their_weights_in_memory():
    base, eplb = _sm(None), _sm(ExpertRouting.zipf(128, 1.0, redundant=16))
    # 16 replicas over 8 ranks: 2 per GPU x (3 x 2048 x 768 x 2 bytes) x 48 MoE layers
    extra = 2 * 3 * 2048 * 768 * 2 * 48
    assert eplb.memory.weight_bytes - base.memory.weight_bytes == pytest.approx(extra)
    assert eplb.kv_capacity_tokens < base.kv_capacity_tokens


def test_load_file(tmp_path):
    f = tmp_path / "loads.csv"
    f.write_text("expert,load\n0,30\n1,10\n3,10\n")
    r = ExpertRouting.from_file(str(f), 4)
    assert r.shares == pytest.approx((0.6, 0.2, 0.0, 0.2))
    f.write_text("expert,load\n9,1\n")
    with pytest.raises(ConfigError, match="outside 0..3"):
        ExpertRouting.from_file(str(f), 4)
