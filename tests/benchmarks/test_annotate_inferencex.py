"""``benchmarks/annotate_inferencex.py``'s rule for runs whose imported GPU count is X * X."""

from tests.benchmarks.helpers import load_benchmark


def _annotate():
    return load_benchmark("annotate_inferencex")


def _row(run: str, name: str, n: int, engine: str = "trtllm-1.2", hardware: str = "b200"):
    return {
        "id": f"{run}-ttft",
        "metric": "ttft_mean_s",
        "source": "aiconfigurator-silicon-sample",
        "scenario": "concurrency",
        "citation": f"ai-dynamo/aiconfigurator silicon_sample.csv row {name}",
        "n_gpus": str(n),
        "hardware": hardware,
        "engine": engine,
    }


def test_named_tp_ep_runs_stating_the_square_ran_on_x_gpus():
    rows = [
        _row("A", "2026_04_06_dsr1_agg_1024x1024_c4_tp8_ep8_920", 64),
        _row("B", "2026_04_06_dsr1_agg_1024x1024_c4_tp8_ep1_921", 8),  # tp 8 alone: as stated
        _row("C", "2026_04_06_dsr1_agg_1024x1024_c4_tp4_ep4_922", 4),  # already X GPUs
        _row("D", "2026_03_25_dsr1_agg_1024x1024_c4_tp8_0_ep8_0_5", 8),  # the other name form
    ]
    assert _annotate().gpus_ran(rows, {}) == {"A": 8}


def test_an_older_config_follows_its_twins_count():
    rows = [
        _row("T", "2026_03_25_dsr1_agg_1024x8192_c128_tp8_0_ep8_0_1088", 8),
        _row("O1", "dsr1_b200_trtllm_fp4_agg_1024x8192_c128_cfg191", 64),
        _row("O2", "dsr1_b200_trtllm_fp4_agg_8192x1024_c256_cfg191", 64),
        _row("P", "dsr1_b200_trtllm_fp4_agg_8192x1024_c256_cfg177", 64),  # no twin: left
    ]
    assert _annotate().gpus_ran(rows, {"O1": "T"}) == {"O1": 8, "O2": 8}


def _mtp_row(name, engine, weights="fp8", hardware="b200", tp=8, ep=1, conc=64, isl=1024):
    return {
        "source": "aiconfigurator-silicon-sample",
        "scenario": "concurrency",
        "citation": f"ai-dynamo/aiconfigurator silicon_sample.csv row {name}",
        "engine": engine,
        "weights": weights,
        "hardware": hardware,
        "tp": str(tp),
        "pp": "1",
        "ep": str(ep),
        "concurrency": str(conc),
        "input_tokens": str(isl),
    }


def test_mtp_runs_get_their_scripts_limits_and_lose_batch_waiting():
    mtp = _annotate().mtp_recipe
    post3 = "2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x1024_c64_tp8_0_ep1_0_1027"
    # dsr1_fp8_b200_trt_mtp.sh at 5d517074c: MTP 3, B = 64, ((3 + 1) 64 + 1024 + 127) // 64 * 64
    assert mtp(_mtp_row(post3, "trtllm-1.2.0rc6.post3")) == {
        "mtp": 3,
        "max_batch_size": 64,
        "max_num_tokens": 1344,
        "batch_wait": None,
    }
    # with attention DP: MTP 1, B = C / 8 (FP8) or C / 4 (FP4) per rank
    dep = _mtp_row(post3, "trtllm-1.2.0rc6.post3", tp=1, ep=8, conc=256)
    assert mtp(dep)["mtp"] == 1 and mtp(dep)["max_batch_size"] == 32
    fp4 = _mtp_row(post3, "trtllm-1.2.0rc6.post3", weights="fp4", tp=1, ep=8, conc=256)
    assert mtp(fp4)["max_batch_size"] == 64
    # 2026-01-14 (bf3456727): listed by name, C / TP per rank with attention DP
    jan = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c256_tp8_0_ep8_0_1259"
    row = _mtp_row(jan, "trtllm-1.1.0rc2.post2", hardware="h200-sxm", tp=1, ep=8, conc=256)
    assert mtp(row)["max_batch_size"] == 32 and mtp(row)["max_num_tokens"] == 1152
    # the non-MTP config's image, and 1.1.0rc2.post2 runs of other sweeps: nothing
    assert mtp(_mtp_row(post3.replace("_1027", "_9"), "trtllm-1.2.0rc6.post2")) == {}
    assert mtp(_mtp_row(post3.replace("_1027", "_9"), "trtllm-1.1.0rc2.post2")) == {}


def test_the_rewriter_removes_a_key_given_none():
    a = _annotate()
    header = "id,extra"
    text = "\r\n".join([header, 'R-ttft,"{""batch_wait"":[40,0.8],""x"":1}"', "S-ttft,"])
    out, changed = a.rewrite_extras(text, lambda row, extra: {"batch_wait": None})
    assert changed == 1
    assert out.split("\r\n")[1] == 'R-ttft,"{""x"":1}"'
    assert out.split("\r\n")[2] == "S-ttft,"


def test_deepseek_trtllm_runs_get_their_scripts_kv_fraction():
    frac = _annotate().free_fraction
    name = "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c32_tp4_ep1_1696"
    inferencex = {"length_range_ratio": 0.8}

    def row(engine, weights="fp8", hardware="b200", tp=4, isl=8192, osl=1024):
        r = _mtp_row(name, engine, weights=weights, hardware=hardware, tp=tp, conc=32, isl=isl)
        return r | {"output_tokens": str(osl)}

    # dsr1_fp8_b200_trt.sh at ec7bafaae: 0.75 at 8192/1024 on TP 4, else 0.8
    assert frac(row("trtllm-1.2.0rc6.post2"), inferencex) == {"free_gpu_memory_fraction": 0.75}
    assert frac(row("trtllm-1.2.0rc6.post2", tp=8), inferencex)["free_gpu_memory_fraction"] == 0.8
    assert frac(row("trtllm-1.1.0rc2.post2"), inferencex)["free_gpu_memory_fraction"] == 0.8
    h200 = row("trtllm-1.1.0rc2.post2", hardware="h200-sxm", tp=8)
    assert frac(h200, inferencex)["free_gpu_memory_fraction"] == 0.75
    assert frac(row("trtllm-1.2.0rc6.post2"), {}) == {}  # not an InferenceX run


def test_early_runs_get_the_budget_without_the_8192_floor():
    budget = _annotate().early_budget
    name = "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp8_ep1_209"
    inferencex = {"length_range_ratio": 0.8}
    # dsr1_fp4_b200_trt_slurm.sh before 64af5a771: (C + ISL + 64 + 63) // 64 * 64
    early = _mtp_row(name, "trtllm-", weights="fp4", conc=256)
    assert budget(early, inferencex) == {"max_num_tokens": 1344}
    assert budget(_mtp_row(name, "trtllm-1.1.0rc2.post2", conc=256), inferencex) != {}
    assert budget(_mtp_row(name, "trtllm-1.2.0rc6.post2", conc=256), inferencex) == {}  # floor
    assert budget(early, inferencex | {"mtp": 3}) == {}  # the MTP scripts' own rule
    older = _mtp_row("dsr1_b200_trtllm_fp4_agg_1024x1024_c256_cfg82", "trtllm-", conc=256)
    assert budget(older, inferencex) == {"max_num_tokens": 1344}  # an R1 twin imported as V3


def test_an_older_sglang_run_whose_twin_is_in_the_sample_only_gets_inferencex_lengths():
    annotate = _annotate()
    name = "dsr1_h200_sglang_fp8_agg_8192x1024_c64_cfg81"
    row = _row("O", name, 8, engine="sglang-0.5.9", hardware="h200-sxm")
    assert annotate.sample_twin(row, {}) == {
        "length_range_ratio": 0.8,
        "inferencex_twin_record": annotate.SAMPLE_TWINS[name],
    }
    assert annotate.sample_twin(row, {"length_range_ratio": 0.8}) == {}  # already annotated
    trt = _row("T", name, 8, engine="trtllm-1.2", hardware="h200-sxm")
    assert annotate.sample_twin(trt, {}) == {}  # TensorRT-LLM runs: that engine's rules
    other = _row("P", "dsr1_h200_sglang_fp8_agg_8192x1024_c64_cfg80", 8, engine="sglang-0.5.9")
    assert annotate.sample_twin(other, {}) == {}  # no twin in the table


def _vllm_row(model: str, hardware: str, engine: str = "vllm-0.15.1", kv: str = ""):
    return {
        "source": "aiconfigurator-silicon-sample",
        "scenario": "concurrency",
        "engine": engine,
        "model": model,
        "hardware": hardware,
        "kv_cache": kv,
    }


def test_inferencex_vllm_runs_get_their_scripts_async_scheduling_and_gpt_oss_kernel():
    recipe = _annotate().vllm_recipe
    ix = {"length_range_ratio": 0.8}
    assert recipe(_vllm_row("gpt-oss-120b", "b200"), ix) == {
        "vllm_async_scheduling": True,
        "experts_compute": "fp8",  # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
        "kv_cache_dtype": "fp8",  # kv-cache-dtype: fp8 from 2025-12-05
    }
    assert recipe(_vllm_row("gpt-oss-120b", "b200", engine="vllm-"), ix) == {
        "vllm_async_scheduling": True,
        "experts_compute": "fp8",  # the 2025-11-02 run: MXFP8 MoE, 16-bit KV
    }
    assert recipe(_vllm_row("gpt-oss-120b", "h200-sxm", "vllm-0.18.0"), ix) == {
        "vllm_async_scheduling": True  # Marlin W4A16 and 16-bit KV: the defaults already
    }
    llama = _vllm_row("llama-3.1-70b", "h200-sxm", engine="vllm-")
    assert recipe(llama, ix) == {"vllm_async_scheduling": True}
    assert recipe(llama, ix, llama_kv=True)["kv_cache_dtype"] == "fp8"
    assert recipe(_vllm_row("gpt-oss-120b", "b200"), {}) == {}  # not an InferenceX run
    assert recipe(_vllm_row("gpt-oss-120b", "b200", engine="trtllm-1.2"), ix) == {}


def test_inferencex_h200_deepseek_sglang_runs_get_their_scripts_launch_flags():
    flags = _annotate().h200_sglang_flags
    row = {
        "source": "aiconfigurator-silicon-sample",
        "scenario": "concurrency",
        "engine": "sglang-0.5.9",
        "hardware": "h200-sxm",
        "model": "deepseek-r1",
        "input_tokens": "8192",
        "output_tokens": "1024",
    }
    ix = {"length_range_ratio": 0.8}
    assert flags(row, ix) == {
        "mem_fraction_static": 0.82,
        "chunked_prefill_size": 32768,
        "max_prefill_tokens": 32768,
        "max_running_requests": 256,  # 512 only at 1024/1024
        "sglang_disable_radix_cache": True,
    }
    one_k = row | {"input_tokens": "1024", "output_tokens": "1024"}
    assert flags(one_k, ix)["max_running_requests"] == 512
    assert flags(row, {}) == {}  # not an InferenceX run
    assert flags(row | {"hardware": "b200"}, ix) == {}  # B200: its own scripts' rule


def test_llama70b_trtllm_runs_get_the_budget_and_batch_waiting_below_tp8_at_1k1k():
    keys = _annotate().llama70b_trtllm
    name = "2026_04_06_llama_3_1_70b_b200_sxm_trtllm_fp4_agg_1024x1024_c4_tp1_ep1_1"
    inferencex = {"length_range_ratio": 0.8}

    def row(tp=1, osl=1024, hardware="b200", model="llama-3.1-70b"):
        r = _mtp_row(name, "trtllm-", weights="fp4", hardware=hardware, tp=tp, conc=4)
        return r | {"output_tokens": str(osl), "model": model}

    # 70b_*_trt_slurm.sh (1b563c858 to its removal): batch waiting only at 1k/1k with TP < 8
    assert keys(row(), inferencex) == {"max_num_tokens": 16384, "batch_wait": [20, 0.9]}
    assert keys(row(tp=4, hardware="h200-sxm"), inferencex)["batch_wait"] == [20, 0.9]
    assert keys(row(tp=8), inferencex) == {"max_num_tokens": 16384}
    assert keys(row(osl=8192), inferencex) == {"max_num_tokens": 16384}
    assert keys(row(), {}) == {}  # not an InferenceX run
    assert keys(row(model="llama-3.1-8b"), inferencex) == {}


def test_gptoss_trtllm_runs_get_their_scripts_limits_fraction_and_kv():
    keys = _annotate().gptoss_trtllm
    name = "2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp4_ep1_1"
    inferencex = {"length_range_ratio": 0.8}

    def row(hardware="b200", conc=8):
        r = _mtp_row(name, "trtllm-1.2.0rc2", weights="fp4", hardware=hardware, tp=4, conc=conc)
        return r | {"model": "gpt-oss-120b"}

    # gptoss_fp4_b200_trt_slurm.sh: --max_batch_size 512 --max_num_tokens 20000, KV fp8 at 0.85
    assert keys(row(), inferencex) == {
        "max_batch_size": 512,
        "max_num_tokens": 20000,
        "free_gpu_memory_fraction": 0.85,
        "kv_cache_dtype": "fp8",
    }
    # gptoss_fp4_h200_trt_slurm.sh: --max_batch_size $CONC, KV dtype auto (the checkpoint's)
    h200 = keys(row("h200-sxm", conc=32), inferencex)
    assert h200["max_batch_size"] == 32 and "kv_cache_dtype" not in h200
    assert keys(row(), {}) == {}  # not an InferenceX run
