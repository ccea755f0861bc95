"""Engine flags a row's deployment set, in ``validate/setup.py``: SGLang's launch flags
(``extra.mem_fraction_static``, ``chunked_prefill_size``, ``max_running_requests``,
``sglang_disable_radix_cache``), mixed chunk and ``--max-prefill-tokens``
(``extra.sglang_mixed_chunk``, ``extra.max_prefill_tokens``) and TensorRT-LLM's batch waiting
(``extra.batch_wait``)."""

from __future__ import annotations

import pytest

from infercast.errors import Unpredictable
from infercast.validate.setup import layout
from infercast.validate.simrun import _scheduler


def _sglang_row(concurrency_row, **extra):
    return concurrency_row(
        engine="sglang-0.5.6.post2", hardware="h200-sxm", weights="fp8", extra=extra
    )


def test_mixed_chunk_row_runs_the_chunked_policy_under_its_prefill_cap(concurrency_row):
    # scheduler.py get_new_batch_prefill: --enable-mixed-chunk puts the running decodes into the
    # prefill batch (the chunked policy); the generator passed --max-prefill-tokens isl + 1500
    plain = layout(_sglang_row(concurrency_row)).setup
    mixed = layout(
        _sglang_row(concurrency_row, sglang_mixed_chunk=True, max_prefill_tokens=2524)
    ).setup
    assert (plain.policy, plain.max_prefill_tokens) == ("prefill-first", 0)
    assert (mixed.policy, mixed.max_prefill_tokens) == ("chunked", 2524)
    assert mixed.admission == plain.admission == "sglang-new-token-ratio"
    assert _scheduler(mixed)["max_prefill_tokens"] == 2524
    assert "max_prefill_tokens" not in _scheduler(plain)


def test_mixed_chunk_without_a_cap_takes_sglangs_default(concurrency_row):
    mixed = layout(_sglang_row(concurrency_row, sglang_mixed_chunk=True)).setup
    assert mixed.max_prefill_tokens == 16384  # server_args.py max_prefill_tokens default


def test_trtllm_batch_wait_only_without_attention_dp(concurrency_row):
    # PyExecutor._schedule calls _waiting_requests only when attention DP is off
    row = dict(model="deepseek-r1", hardware="b200", engine="trtllm-1.2.0rc6.post3", weights="fp8")
    tp8 = layout(concurrency_row(**row, n_gpus=8, tp=8, extra={"batch_wait": [40, 0.8]})).setup
    dep = layout(
        concurrency_row(**row, n_gpus=8, tp=1, ep=8, extra={"batch_wait": [40, 0.8]})
    ).setup
    assert tp8.batch_wait == (40, 0.8) and dep.batch_wait == ()
    sched = _scheduler(tp8)
    assert (sched["batch_wait_timeout_iters"], sched["batch_wait_max_tokens_ratio"]) == (40, 0.8)


@pytest.mark.parametrize(
    "extra", [{"batch_wait": [0, 0.8]}, {"batch_wait": 40}, {"sglang_mixed_chunk": "yes"}]
)
def test_bad_server_args_make_the_row_unpredictable(concurrency_row, extra):
    with pytest.raises(Unpredictable):
        layout(
            concurrency_row(
                engine="trtllm-1.2.0rc6" if "batch_wait" in extra else "sglang-0.5.6",
                extra=extra,
            )
        )


def test_recipe_kv_dtype_replaces_the_engines_default(concurrency_row):
    # InferenceX's B200 DeepSeek-R1 SGLang recipes pass --kv-cache-dtype fp8_e4m3; a row's own
    # kv_cache cell still wins
    row = dict(model="deepseek-r1", hardware="b200", engine="sglang-0.5.9", weights="fp8")
    row |= dict(n_gpus=8, tp=8)
    assert layout(concurrency_row(**row)).setup.kv_cache == "bf16"
    assert layout(concurrency_row(**row, extra={"kv_cache_dtype": "fp8"})).setup.kv_cache == "fp8"
    stated = concurrency_row(**row, kv_cache="bf16", extra={"kv_cache_dtype": "fp8"})
    assert layout(stated).setup.kv_cache == "bf16"
    with pytest.raises(Unpredictable):
        layout(concurrency_row(**row, extra={"kv_cache_dtype": "int3"}))


def test_recipe_kv_dtype_applies_to_an_expert_only_mxfp4_checkpoint(concurrency_row):
    # gpt-oss ships MXFP4 experts and a BF16 rest: KV bf16 ("auto") unless the run's recipe sets
    # kv_cache_config.dtype fp8 (InferenceX gptoss_fp4_b200_trt_slurm.sh)
    row = dict(model="gpt-oss-120b", hardware="b200", engine="trtllm-1.2.0rc2", weights="fp4")
    assert layout(concurrency_row(**row)).setup.kv_cache == "bf16"
    fp8 = layout(concurrency_row(**row, extra={"kv_cache_dtype": "fp8"})).setup
    assert (fp8.kv_cache, fp8.weights) == ("fp8", "bf16")


def _b200_sglang(concurrency_row, tp=8, **extra):
    return concurrency_row(
        model="deepseek-r1",
        hardware="b200",
        engine="sglang-0.5.9",
        weights="fp8",
        n_gpus=tp,
        tp=tp,
        extra={"kv_cache_dtype": "fp8", **extra},
    )


def test_disable_radix_cache_admits_by_sglangs_ignore_eos_rule(concurrency_row):
    # schedule_policy.py add_one_req: ignore_eos requests go to add_one_req_ignore_eos when the
    # tree cache is disabled (--disable-radix-cache); the benchmark clients send ignore_eos
    plain = layout(_b200_sglang(concurrency_row)).setup
    no_radix = layout(_b200_sglang(concurrency_row, sglang_disable_radix_cache=True)).setup
    assert plain.admission == "sglang-new-token-ratio"
    assert no_radix.admission == "sglang-ignore-eos"
    assert dict(no_radix.admission_params) == dict(plain.admission_params)
    assert _scheduler(no_radix)["admission"] == "sglang-ignore-eos"


def test_recipe_launch_flags_replace_the_presets_limits(concurrency_row):
    # InferenceX dsr1_fp8_b200.sh at TP 4: --max-running-requests 32 --chunked-prefill-size 8192
    # --mem-fraction-static 0.95 (the preset: 2048, 16384 on B200, 0.85 at TP 4)
    plain = layout(_b200_sglang(concurrency_row, tp=4)).setup
    flags = dict(mem_fraction_static=0.95, chunked_prefill_size=8192, max_running_requests=32)
    ran = layout(_b200_sglang(concurrency_row, tp=4, **flags))
    assert (plain.max_seqs, plain.max_batched_tokens, plain.memory_fraction) == (2048, 16384, 0.85)
    assert (ran.setup.max_seqs, ran.setup.max_batched_tokens) == (32, 8192)
    assert ran.setup.memory_fraction == 0.95
    assert any("mem_fraction_static 0.95" in n for n in ran.notes)


def test_trtllm_recipe_limits_leave_the_draft_tokens_budget_out(concurrency_row):
    # InferenceX's MTP scripts: --max_batch_size C, --max_num_tokens ((k + 1) C + ISL + 127) // 64
    # * 64 per rank; microBatchScheduler.cpp counts 1 + k tokens per generation request, the
    # simulator one, so it runs the budget less k per seat (per rank x ranks under attention DP)
    row = dict(model="deepseek-r1", hardware="b200", engine="trtllm-1.2.0rc6.post3", weights="fp8")
    mtp = {"mtp": 3, "max_batch_size": 64, "max_num_tokens": 1344}
    tp8 = layout(concurrency_row(**row, n_gpus=8, tp=8, extra=mtp)).setup
    assert (tp8.max_seqs, tp8.max_batched_tokens) == (64, 1344 - 3 * 64)
    plain = layout(concurrency_row(**row, n_gpus=8, tp=8)).setup
    assert (plain.max_seqs, plain.max_batched_tokens) == (2048, 8192)  # the trtllm-1.0 preset
    dep = {"mtp": 1, "max_batch_size": 32, "max_num_tokens": 1152}
    dp8 = layout(concurrency_row(**row, n_gpus=8, tp=1, ep=8, extra=dep)).setup
    assert (dp8.max_seqs, dp8.max_batched_tokens) == (8 * 32, 8 * (1152 - 32))
    sglang = layout(concurrency_row(**(row | {"engine": "sglang-0.5.6"}), extra=mtp)).setup
    assert sglang.max_batched_tokens != 1344 - 3 * 64  # a TensorRT-LLM flag only


@pytest.mark.parametrize(
    "extra",
    [
        {"mem_fraction_static": 1.5},
        {"chunked_prefill_size": 0},
        {"max_running_requests": 2.5},
        {"sglang_disable_radix_cache": 1},
    ],
)
def test_bad_launch_flags_make_the_row_unpredictable(concurrency_row, extra):
    with pytest.raises(Unpredictable, match=next(iter(extra))):
        layout(_b200_sglang(concurrency_row, **extra))


@pytest.mark.parametrize(
    "extra",
    [
        {"max_batch_size": 0, "max_num_tokens": 1024},
        {"max_batch_size": 4, "max_num_tokens": 8, "mtp": 3},
        {"max_num_tokens": 1024, "mtp": 3},  # drafts need the seats they are sized for
        {"max_batch_size": 4, "max_num_tokens": 1024.5},
    ],
)
def test_bad_trtllm_limits_make_the_row_unpredictable(concurrency_row, extra):
    with pytest.raises(Unpredictable):
        layout(concurrency_row(engine="trtllm-1.2.0rc6", extra=extra))


def test_mtp_runs_are_scored_with_the_assumed_layouts(concurrency_row):
    # the simulator runs them without their draft tokens (trtllm_limits), as disaggregated MTP
    # runs are left unannotated: their rows leave "weights and layout stated"
    from infercast.cost.profiles import load_profile_set
    from infercast.validate.evaluate import Evaluator
    from infercast.validate.score import assumed_layout

    row = dict(model="deepseek-r1", hardware="b200", engine="trtllm-1.2.0rc6.post3", weights="fp8")
    limits = {"max_batch_size": 8, "max_num_tokens": 1152}
    cases = [
        concurrency_row(**row, n_gpus=8, tp=8, extra=limits | {"mtp": 3}),
        concurrency_row(**row, n_gpus=8, tp=8, extra=limits),
    ]
    preds = Evaluator(cases, simulate=False).predict(load_profile_set(None))
    assert [assumed_layout(p) for p in preds] == [True, False]


def test_recipe_kv_fraction_replaces_trtllms_default(concurrency_row):
    # InferenceX's DeepSeek TensorRT-LLM scripts set kv_cache_config.free_gpu_memory_fraction
    # (0.75 at 8192/1024 on TP 4 FP8, dsr1_fp8_b200_trt.sh at ec7bafaae); the preset says 0.9
    row = dict(model="deepseek-r1", hardware="b200", engine="trtllm-1.2.0rc6.post2", weights="fp8")
    row |= dict(n_gpus=4, tp=4)
    assert layout(concurrency_row(**row)).setup.kv_free_fraction == 0.9
    stated = concurrency_row(**row, extra={"free_gpu_memory_fraction": 0.75})
    assert layout(stated).setup.kv_free_fraction == 0.75
    with pytest.raises(Unpredictable):
        layout(concurrency_row(**row, extra={"free_gpu_memory_fraction": 1.5}))


def test_a_budget_alone_caps_the_running_requests_at_it(concurrency_row):
    # microBatchScheduler.cpp: each generation request takes a token of max_num_tokens, so a
    # budget of 1152 without --max_batch_size runs at most 1152 requests (the preset says 2048)
    row = dict(model="deepseek-r1", hardware="b200", engine="trtllm-", weights="fp4")
    s = layout(concurrency_row(**row, n_gpus=8, tp=8, extra={"max_num_tokens": 1152})).setup
    assert (s.max_seqs, s.max_batched_tokens) == (1152, 1152)


def test_vllm_async_scheduling_row_runs_the_lagged_admission(concurrency_row):
    # InferenceX's vLLM recipes: --async-scheduling, the default from v0.14 (data/README.md)
    plain = layout(concurrency_row()).setup
    lagged = layout(concurrency_row(extra={"vllm_async_scheduling": True})).setup
    assert (plain.async_scheduling, lagged.async_scheduling) == (False, True)
    assert _scheduler(lagged)["async_scheduling"] is True
    assert "async_scheduling" not in _scheduler(plain)
    with pytest.raises(Unpredictable, match="vllm_async_scheduling"):
        layout(concurrency_row(extra={"vllm_async_scheduling": "yes"}))


def test_gpt_oss_recipe_picks_its_moe_kernel_and_kv_dtype(concurrency_row):
    # B200 vLLM: VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (W4A8) and kv-cache-dtype fp8 in the script
    row = dict(model="gpt-oss-120b", hardware="b200", weights="fp4", engine="vllm-0.15.1")
    default = layout(concurrency_row(**row)).setup
    recipe = layout(
        concurrency_row(**row, extra={"experts_compute": "fp8", "kv_cache_dtype": "fp8"})
    ).setup
    assert (default.experts, default.kv_cache) == ("mxfp4/bf16", "bf16")
    assert (recipe.experts, recipe.kv_cache) == ("mxfp4/fp8", "fp8")
    with pytest.raises(Unpredictable, match="experts_compute"):
        layout(concurrency_row(**row, extra={"experts_compute": "fp4"}))
