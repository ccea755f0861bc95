"""Each scenario's predictor on hand-checked rows: the workload built, and how times combine."""

from __future__ import annotations

import json
import math

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.specs.engines import load_engine
from infercast.validate.cases import read_cases
from infercast.validate.evaluate import Evaluator
from infercast.validate.ledger import StepModels, expand
from infercast.validate.predict import plan_case
from infercast.validate.setup import Unpredictable, layout

COLS = (
    "id,scenario,metric,value,model,hardware,n_gpus,tp,pp,ep,weights,kv_cache,engine,input_tokens,"
    "output_tokens,batch,concurrency,request_rate,dataset\n"
)
PROF = EfficiencyProfile()


def case(cells: str):
    (c,) = read_cases(COLS + cells + "\n")
    assert c.problem is None, c.problem
    return c


@pytest.fixture(scope="module")
def models():
    return StepModels()


def times(plan, models):
    sm = models.get(plan.layout.setup)
    return [sm.step_time_s(*expand(s)) for s in plan.shapes]


def test_static_batch_per_gpu_throughput(models):
    c = case(
        "s,static_batch,output_throughput_per_gpu,1,llama-2-70b,h200-sxm,2,2,1,,fp8,fp8,trtllm-0.9,"
        "128,2048,64,,,"
    )
    plan = plan_case(c, models)
    # one prefill of the whole batch, then O-1 decode steps at the mean context I + O/2
    assert plan.shapes == (((64, 128, 0),), ((64, 1, 128 + 1024),))
    t = times(plan, models)
    assert plan.combine(t, PROF) == pytest.approx(64 * 2048 / (t[0] + 2047 * t[1]) / 2)
    total = plan_case(
        case(
            c_cells
            := "s,static_batch,output_throughput_total,1,llama-2-70b,h200-sxm,2,2,1,,fp8,fp8,"
            "trtllm,128,2048,64,,,"
        ),
        models,
    )
    assert total.combine(t, PROF) == pytest.approx(2 * plan.combine(t, PROF)), c_cells


def test_kernel_prefill_and_decode_shapes(models):
    p = plan_case(
        case(
            "k,kernel,prefill_time_s,1,llama-2-70b,a100-sxm-80gb,2,2,1,,fp16,,splitwise,512,128,4,,"
            ","
        ),
        models,
    )
    d = plan_case(
        case(
            "k,kernel,decode_step_s,1,llama-2-70b,a100-sxm-80gb,2,2,1,,fp16,,splitwise,512,128,4,,,"
        ),
        models,
    )
    assert p.shapes == (((4, 512, 0),),) and d.shapes == (((4, 1, 512 + 64),),)
    assert p.layout.setup.tp == 2 and p.layout.setup.kv_cache == "fp16"


def _mixed(extra: str):
    (c,) = read_cases(
        "id,scenario,metric,value,model,hardware,n_gpus,tp,weights,engine,input_tokens,batch,"
        f"extra\nm,kernel,mixed_step_s,1,llama-3.1-8b,h200-sxm,1,1,bf16,pytorch,2048,8,{extra}\n"
    )
    return c


def test_kernel_mixed_step_is_the_decode_batch_and_the_chunk_in_one_step(models):
    plan = plan_case(_mixed('"{""prefill_chunk_tokens"": 512}"'), models)
    assert plan.shapes == (((8, 1, 2048), (1, 512, 0)),)
    sm = models.get(plan.layout.setup)
    both = sm.step_time_s(*expand(plan.shapes[0]))
    decode = sm.step_time_s(*expand(((8, 1, 2048),)))
    chunk = sm.step_time_s(*expand(((1, 512, 0),)))
    # more work than either part alone, less than both: the weights are read once
    assert max(decode, chunk) < both < decode + chunk


def test_kernel_mixed_step_without_its_chunk_is_not_predicted(models):
    with pytest.raises(Unpredictable, match="prefill_chunk_tokens"):
        plan_case(_mixed(""), models)


def test_kernel_hardware_rows_scale_the_spec(models):
    mm = plan_case(
        case(
            "h,kernel,matmul_flops_per_s,1,,h100-sxm,1,,,,bf16,,mamf,,,,,,mamf:best-"
            "shape=1024x9216x14336"
        ),
        models,
    )
    assert mm.combine([], PROF) == pytest.approx(989.4e12 * PROF.gemm_eff("bf16", 1024), rel=0.01)
    link = plan_case(
        case(
            "l,kernel,link_bandwidth_bytes_per_s,1,,h200-sxm,8,,,,,,nvbandwidth,,,,,,nvlink "
            "bidirectional"
        ),
        models,
    )
    assert link.combine([], PROF) == pytest.approx(2 * 450e9 * PROF.comm_bw_eff, rel=0.01)


def test_single_stream(models):
    tps = plan_case(
        case(
            "g,single_stream,tokens_per_s_single_stream,1,llama-2-7b,a100-sxm-80gb,1,1,1,,int8,,"
            "gpt-fast,5,200,1,,,"
        ),
        models,
    )
    assert tps.shapes == (((1, 1, 5 + 100),),)
    bw = plan_case(
        case(
            "g,single_stream,achieved_bandwidth_bytes_per_s,1,llama-2-7b,a100-sxm-80gb,1,1,1,,int8,"
            ",gpt-fast,5,200,1,,,"
        ),
        models,
    )
    t = times(tps, models)
    assert tps.combine(t, PROF) == pytest.approx(1 / t[0])
    weights = models.get(bw.layout.setup).memory.weight_bytes
    assert bw.combine(t, PROF) == pytest.approx(weights / t[0]) and 6.5e9 < weights < 7.5e9


def test_offline_runs_at_the_engine_max_batch(models):
    c = case(
        "o,offline,output_throughput_per_gpu,1,llama-3.1-8b,h100-sxm,2,1,1,,fp8,,tensorrt-llm-1.0,"
        "128,128,,,,synthetic-fixed"
    )
    plan = plan_case(c, models)
    lay = layout(c)
    assert (
        lay.replicas == 2 and lay.setup.kv_cache == "fp8"
    )  # TRT-LLM quantizes KV with fp8 weights
    fit = models.get(lay.setup).memory.max_batch(256)
    running = min(fit, load_engine("trtllm-1.0").max_num_seqs)
    assert running == 2048  # an 8B model at 256 tokens: the engine cap binds, not memory
    # prompts go in groups of 8192 // 128 = 64 (one step each); a cycle is O - 1 + 1 = 128 steps,
    # so a decode step holds 2048 * 127 / 128 = 2032 sequences at context 128 + 64
    assert plan.shapes[0] == ((2032, 1, 192),)
    assert plan.shapes[1] == ((2048 - 64, 1, 192), (64, 128, 0))


def test_concurrency_splits_clients_over_replicas(models):
    c = case(
        "c,concurrency,tpot_mean_s,1,llama-3.1-8b,h100-sxm,4,2,1,,fp8,,vllm-0.12.0,1024,256,,32,,"
        "synthetic-fixed"
    )
    plan = plan_case(c, models)
    assert plan.layout.replicas == 2
    assert json.loads(plan.sim_key[1])["concurrency"] == 16  # 32 clients over 2 replicas of tp=2
    assert plan.combine is not None and plan.simulate is not None


def test_server_row_uses_the_simulator_per_replica(models):
    c = case(
        "v,server,output_throughput_total,1,llama-3.1-8b,h100-sxm,2,1,1,,bf16,,tensorrt-llm-0.14,"
        "128,128,,,4,synthetic-fixed;n_requests=500;poisson-arrivals"
    )
    plan = plan_case(c, models)
    workload = json.loads(plan.sim_key[1])
    assert plan.combine is None and workload["rate"] == 2.0 and workload["num_requests"] == 250
    (pred,) = Evaluator([c]).predict(ProfileSet())
    assert pred.predicted == pytest.approx(
        4 * 128, rel=0.15
    )  # under capacity: throughput = rate x output


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        (
            "x,speculative,speedup,2,llama-3.1-8b,h100-sxm,1,1,1,,bf16,,eagle,,,1,,,",
            "acceptance length",
        ),
        (
            "x,speculative,acceptance_length,2,llama-3.1-8b,h100-sxm,1,1,1,,bf16,,eagle,,,1,,,",
            "an input to the cost model",
        ),
        (
            "x,disaggregated,ttft_mean_s,2,llama-3.1-8b,h100-sxm,8,,,,fp8,,sglang,1024,1024,,8,,",
            "disaggregated",
        ),
        (
            "x,offline,output_throughput_total,2,llama-2-70b,h100-sxm,8,,,,,,mlperf,,,,,,"
            "mlperf:llama2-70b-99",
            "weight precision",
        ),
        (
            "x,kernel,decode_step_s,2,no-such-model,h100-sxm,1,1,1,,bf16,,x,128,32,1,,,",
            "no-such-model",
        ),
        (
            "x,offline,output_throughput_total,2,llama-3.1-8b,h100-sxm,1,1,1,,bf16,,trt,,,,,,"
            "unknown-ds",
            "input_tokens",
        ),
        ("x,weird,ttft_mean_s,2,llama-3.1-8b,h100-sxm,1,1,1,,bf16,,x,1,1,,,,", "unknown scenario"),
    ],
)
def test_unpredictable_rows_carry_a_reason(models, cells, reason):
    with pytest.raises(Unpredictable, match=reason):
        plan_case(case(cells), models)
    (pred,) = Evaluator([case(cells)]).predict(ProfileSet())
    assert (
        pred.predicted is None
        and reason in pred.skipped_reason
        and math.isnan(pred.error_pct or math.nan)
    )


def test_speculative_speedup_at_the_paired_acceptance_length(models):
    from infercast.cost.speculative import SpeculativeConfig, SpeculativeModel
    from infercast.cost.step import StepModel
    from infercast.specs.catalog import load_hardware, load_model
    from infercast.specs.precision import Precision

    rows = (
        "p,speculative,speedup,1,llama-3.1-8b,rtx-3090,1,1,1,,,,vllm + eagle-3 (chain "
        "2),,,1,,,mt-bench\nq,speculative,acceptance_length,3.1,llama-3.1-8b,rtx-3090,1,1,1,,,,"
        "vllm + eagle-3 (chain 2),,,1,,,mt-bench"
    )
    preds = Evaluator(read_cases(COLS + rows + "\n")).predict(ProfileSet())
    assert preds[1].predicted is None and "input" in preds[1].skipped_reason
    # chain of 2 drafts: verify 3 tokens; 16-bit when the precision is not stated; context 256 + 128
    target = StepModel(
        load_model("llama-3.1-8b"), load_hardware("rtx-3090"), Precision.parse("fp16")
    )
    st = SpeculativeModel(target, SpeculativeConfig("eagle", 2, verify_tokens=3)).step(1, 384)
    assert preds[0].predicted == pytest.approx(st.plain_s * 3.1 / (st.draft_s + st.verify_s))
    assert "16-bit assumed" in preds[0].notes[0]


def test_pipeline_parallel_runs_pp_micro_batches(models):
    from infercast.closedform.steady import closed_loop

    c = case(
        "pp,offline,output_throughput_total,1,llama-3.1-70b,h100-sxm,2,1,2,,fp8,,tensorrt-llm,1024,"
        "1024,,,,"
    )
    plan = plan_case(c, models)
    sm = models.get(plan.layout.setup)
    limit = min(sm.memory.max_batch(2048), 2048)
    cl = closed_loop(limit // 2, limit // 2, 1024, 1024, 8192)
    assert plan.shapes == cl.shapes  # each micro-batch holds half the running requests
    t = times(plan, models)
    assert plan.combine(t, PROF) == pytest.approx(2 * cl.metrics(t)["output_tokens_per_s"])


def test_part_without_a_tensor_peak_is_not_predicted(models):
    with pytest.raises(Unpredictable, match="no 16-bit or narrower tensor peak"):
        plan_case(
            case(
                "r,offline,output_throughput_total,1,llama-3.3-70b,rtx-pro-6000,1,1,1,,fp4,,trtllm,"
                "128,128,,,,"
            ),
            models,
        )


def test_a_tp_that_cannot_shard_the_heads_is_predicted_as_attention_dp_and_marked(models):
    from infercast.validate.score import assumed_layout
    from infercast.validate.setup import ASSUMED_DP_NOTE

    # DeepSeek-R1 (128 heads) "tp 72" on GB200: no engine shards 128 heads 72 ways, so the run
    # was attention DP with the experts over the 72 GPUs (wide EP); predicted so, and marked
    c = case(
        "w,concurrency,tpot_mean_s,0.03,deepseek-r1,gb200,72,72,1,1,fp8,,sglang-,1024,1024,,4096,,"
    )
    lay = layout(c)
    assert (lay.setup.tp, lay.setup.ep, lay.setup.attn_dp, lay.replicas) == (72, 72, True, 1)
    assert any(n.startswith(ASSUMED_DP_NOTE) and "128 attention heads" in n for n in lay.notes)
    (p,) = Evaluator([c], simulate=False).predict(ProfileSet())
    assert p.predicted is not None and assumed_layout(p)
    # a TP that shards the heads keeps its TP layout
    ok = layout(
        case("t,concurrency,tpot_mean_s,0.03,deepseek-r1,b200,8,8,1,1,fp8,,sglang-,1024,1024,,64,,")
    )
    assert not ok.setup.attn_dp and not ok.notes


def test_length_range_ratio_predicts_the_mean_lengths(models):
    # InferenceX's harness draws each request's lengths uniformly from [0.8 L, L]
    # (benchmark_serving --random-range-ratio 0.8): a closed loop serves the mean, 0.9 L
    import json

    from infercast.validate.setup import length_range_ratio

    row = "r,concurrency,tpot_mean_s,0.03,llama-3.1-70b,h200-sxm,8,8,1,1,fp8,,vllm-,1000,2000,,16,,"

    def with_extra(extra: dict):
        cell = '"' + json.dumps(extra).replace('"', '""') + '"'  # a CSV cell holding JSON
        (c,) = read_cases(COLS.rstrip("\n") + ",extra\n" + row + "," + cell + "\n")
        assert c.problem is None, c.problem
        return c

    ranged = with_extra({"length_range_ratio": 0.8})
    fixed = case(row.replace("1000,2000", "900,1800"))
    assert length_range_ratio(ranged) == 0.8 and length_range_ratio(fixed) is None
    p_ranged, p_fixed = plan_case(ranged, models), plan_case(fixed, models)
    assert (
        p_ranged.shapes == p_fixed.shapes
    )  # the same closed loop as fixed 900/1800-token requests
    assert any("[0.8 L, L]" in n for n in p_ranged.notes)
    assert (
        length_range_ratio(with_extra({"length_range_ratio": 1.5})) is None
    )  # outside [0, 1): the stated lengths are used
