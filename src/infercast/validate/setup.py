"""How a measurement row's system is set up: layout, precision, engine limits, profile group.

Everything here is an *assumption about the row's engine* where the source is
silent; each one is named, and ``docs/validation.md`` lists them:

- Engine limits (max running sequences, tokens per step), the KV block size, the memory
  rule and the scheduling policy are the row's engine preset (``data/engines/*.toml``,
  :mod:`infercast.specs.engines`, each value cited there), resolved on the row's part and TP
  size (:func:`row_preset`): TensorRT-LLM's engine flow (:func:`trtllm_engine_flow`)
  ``trtllm-engine-0.17``, its PyTorch flow ``trtllm-1.0``, vLLM before 0.8 (V0) ``vllm-0.6``,
  later vLLM ``vllm-0.12``, SGLang ``sglang-0.5``; ``validate --engine`` puts one preset on
  every row. Memory: vLLM's ``gpu_memory_utilization`` and SGLang's ``mem_fraction_static``
  are fractions of the device's total memory; TensorRT-LLM sizes its KV cache as a fraction
  of the memory *left free* after the weights and the activation profile
  (``KvCacheConfig.free_gpu_memory_fraction``, default 0.9; the perf-overview runs pass
  ``--kv_cache_free_gpu_mem_fraction`` 0.95, falling back to 0.90). The two differ most where
  the weights nearly fill the part (Llama-3.1-70B FP8 on one 80 GB H100: 3.1 GB of KV under
  the first rule, 10 GB under TensorRT-LLM's). Engines without a preset (llama.cpp,
  gpt-fast, research code) get :data:`OTHER_LIMITS` and :data:`MEMORY_FRACTION` of all memory.
- TensorRT-LLM v0.17's perf-overview rows ran engines ``trtllm-bench build --dataset`` sized for
  their lengths (:func:`trtllm_bench_limits`: its running limit and token budget replace the
  preset's), noted on the row.
- KV dtype when not stated (neither the row's ``kv_cache`` nor its recipe's
  ``extra.kv_cache_dtype``): FP8 for TensorRT-LLM with 8-bit or narrower weights
  (its perf tables quantize the KV cache with the weights), else the 16-bit dtype.
- Weights when the source does not say: the checkpoint's own dtype
  (:func:`infercast.specs.checkpoint.checkpoint_weights`: ``quantization_config.quant_method``, else
  ``torch_dtype``; FP32 checkpoints are served in FP16, as vLLM's ``dtype=auto``
  does), marked per row (``assumed_weights``) and counted in the summary.
- A checkpoint that quantizes only its routed experts (gpt-oss: MXFP4 experts,
  ``modules_to_not_convert`` attention / router / embeddings / LM head in BF16)
  is served as shipped when the row states a narrow dtype: experts MXFP4, the rest
  BF16, the KV cache BF16 (the checkpoint quantizes no KV; TensorRT-LLM's KV dtype
  ``auto`` follows the checkpoint). The experts' GEMMs run W4A8 (MXFP8 activations,
  the FP8 rate) under TensorRT-LLM on Blackwell and W4A16 (BF16 rate) elsewhere:
  TensorRT-LLM's defaults ``W4A8_MXFP4_MXFP8`` on Blackwell and ``W4A16_MXFP4`` on
  Hopper (``cost/experts.py`` cites them); Hopper and older parts have no FP4
  tensor cores. A run's recipe may choose otherwise (``extra.kv_cache_dtype``,
  ``extra.experts_compute``: :func:`checkpoint_experts`). Noted per row.
- TensorRT-LLM's v1.0 performance overview runs its MoE models with ``trtllm-bench --tp
  $tp_size --pp $pp_size --ep $ep_size`` ("For MoE models", its "Reproducing Benchmarked
  Results") but its tables name only the TP size: such a row with ``tp > 1`` and no ``ep`` is
  predicted with ``ep = tp`` (attention TP, experts split over the TP group: TensorRT-LLM's
  moe_ep_size = tp, moe_tp_size = 1), noted on the row.
- TensorRT-LLM applies Llama 4's chunked attention to context requests only ("chunked
  attention can only be applied to context requests", its ``docs/source/features/long-sequence.md``,
  "Chunked attention") and keeps every layer's full KV, so a decode step attends to the whole
  context on every layer; except on Blackwell, whose TRTLLM-Gen attention kernels also take the
  chunk size in generation (``fmhaKernels.h``: tiles outside a chunked-causal mask are skipped).
  Those setups (TensorRT-LLM, not Blackwell) are predicted with the chunked layers run as full
  attention (:func:`engine_model`); that also charges full-span attention to prefill, which
  overstates it only past one chunk (a 20,000-token prompt of Llama-4-Maverick: about 2x the
  attention FLOPs of its prefill, a few % of a 20000/2000 offline run).
- Expert parallel wider than the TP group (``ep > tp*pp``) means attention data
  parallel (SGLang ``--enable-dp-attention``, TensorRT-LLM attention DP): one
  replica of ``ep`` GPUs with ``Parallelism(tp=ep, ep=ep, attn_dp=True)``
  (noted on the row). TensorRT-LLM schedules each attention-DP rank by itself, each with the
  preset's running limit and token budget (``tensorrt_llm/_torch/pyexecutor/py_executor.py``
  ``PyExecutor._balance_adp_requests`` compares every rank's own counts with ``max_batch_size``),
  so its replica holds ``ep`` times both; SGLang divides its chunked prefill size among the DP
  ranks, so its totals stay the preset's.
- A stated TP that cannot shard the model's attention heads (DeepSeek-R1's 128 heads
  over "tp 72" GB200 GPUs; engines refuse it, ``specs.parallel.check_attention_split``)
  means the run was attention data parallel over those GPUs, the experts spread over all
  of them (the wide-EP layout of such deployments): predicted that way, marked with
  :data:`ASSUMED_DP_NOTE` and summarized with the other assumed layouts, not fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infercast.cost.profiles import HARDWARE_FAMILIES, hardware_family  # noqa: F401 (re-exported)
from infercast.errors import InfercastError, Unpredictable  # noqa: F401 (Unpredictable re-exported)
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.checkpoint import checkpoint_expert_format
from infercast.specs.engines import (  # noqa: F401 (engine_family, trtllm_engine_flow re-exported)
    SGLANG_RULES,
    EnginePreset,
    engine_family,
    load_engine,
    preset_name,
    trtllm_engine_flow,
)
from infercast.specs.model import ATTN_CHUNKED, ATTN_FULL, ModelSpec
from infercast.specs.parallel import attention_split_problem
from infercast.units import GiB
from infercast.validate.cases import Case

MEMORY_FRACTION = (
    0.9  # engines without a preset: of all device memory (vLLM's default, module docstring)
)
OTHER_LIMITS = (
    256,
    8192,
)  # engines without a preset: vLLM V0's max_num_seqs, the common 8192-token budget
NARROW = ("fp8", "int8", "int4", "fp4")


def group_key(case: Case) -> str:
    """Profile group of a row: ``<hardware family>/<engine family>``; TensorRT-LLM's engine
    flow is its own family, ``trtllm-engine`` (:func:`trtllm_engine_flow`), while ``trtllm``
    is the PyTorch backend that ``--engine trtllm`` means today."""
    family = engine_family(case.engine)
    if family == "trtllm" and trtllm_engine_flow(case.engine):
        family = "trtllm-engine"
    return f"{hardware_family(case.hardware)}/{family}"


def row_preset(
    case: Case, hardware_key: str, tp: int, engine: EnginePreset | None = None
) -> EnginePreset | None:
    """The row's engine preset (``engine`` when given: ``validate --engine``) on its part and TP
    size."""
    name = None if engine is not None else preset_name(case.engine)
    preset = engine if engine is not None else (load_engine(name) if name else None)
    if preset is None:
        return None
    try:
        memory = load_hardware(hardware_key).memory_bytes
    except InfercastError:
        return preset  # an unknown part is reported where the row is planned
    return preset.for_hardware(hardware_key, memory, tp)


@dataclass(frozen=True)
class Setup:
    """Everything that fixes one :class:`~infercast.cost.step.StepModel` (hashable cache key)."""

    model: str
    hardware: str
    weights: str
    kv_cache: str
    tp: int
    pp: int
    ep: int
    max_seqs: int
    max_batched_tokens: int
    attn_dp: bool = False  # attention data parallel over the tp GPUs (Parallelism.attn_dp)
    # routed experts' own "<format>/<compute>" (cost.experts.ExpertPrecision), "" = ``weights``
    experts: str = ""
    # KV = this fraction of the memory weights/activations leave (TRT-LLM); 0: memory_fraction of
    # all
    kv_free_fraction: float = 0.0
    memory_fraction: float = MEMORY_FRACTION  # of all device memory (the ``total`` memory rule)
    policy: str = (
        "chunked"  # the engine's scheduling policy, as the simulator runs it (sched/policies.py)
    )
    # chunked-attention layers attend to the whole context (TRT-LLM on Hopper; engine_model)
    chunked_as_full: bool = False
    # the engine's admission rule and its parameters as (name, value) pairs (sched/admission.py)
    admission: str = "current-use"
    admission_params: tuple[tuple[str, float], ...] = ()
    # TensorRT-LLM's attention-DP context balance the run's recipe enabled: (timeout_iters,
    # batching_wait_iters) over the ``tp`` attention-DP ranks (``adp_balance``); () = off
    adp_balance: tuple[int, int] = ()
    # SGLang's --max-prefill-tokens as the run set it (``sglang_server_args``); 0 = no cap
    max_prefill_tokens: int = 0
    # TensorRT-LLM's batch waiting the run's recipe set: (timeout_iters, max_tokens_ratio)
    # (``batch_wait``); () = off
    batch_wait: tuple[int, float] = ()
    # vLLM's async scheduling the run had (``async_scheduling``): a step's contents fixed when the
    # step before it starts (sim/replica.py, "Async scheduling")
    async_scheduling: bool = False

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Layout:
    """A row's system: one replica's setup, how many replicas, notes on assumptions."""

    setup: Setup
    replicas: int
    num_gpus: int
    notes: tuple[str, ...] = ()


def kv_dtype(case: Case) -> str:
    """Stated KV dtype, else the engine's usual choice (module docstring)."""
    if case.kv_cache:
        return case.kv_cache
    stated = case.extra.get("kv_cache_dtype")  # the run's recipe (data/README.md)
    if stated is not None:
        if stated not in ("fp8", "bf16", "fp16"):
            raise Unpredictable(f"extra.kv_cache_dtype {stated!r}: must be fp8, bf16 or fp16")
        return stated
    if engine_family(case.engine) == "trtllm" and case.weights in ("fp8", "fp4"):
        return "fp8"
    return "fp16" if case.weights in ("fp16", "int8", "int4") else "bf16"


def checkpoint_experts(case: Case) -> str:
    """``"mxfp4/<compute>"`` when the row runs a checkpoint that quantizes only its routed experts
    to MXFP4 (module docstring), else "". ``extra.experts_compute`` ("fp8" or "bf16") is the
    dtype the run's recipe chose for those GEMMs' activations (InferenceX's B200 vLLM gpt-oss
    script sets ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``: W4A8, data/README.md); without it the
    engine's default."""
    if (
        checkpoint_expert_format(case.model) != "mxfp4"
        or case.weights not in NARROW
        or engine_family(case.engine) not in ("trtllm", "vllm", "sglang")
    ):  # GPU engines' MoE kernels
        return ""
    stated = case.extra.get("experts_compute")
    if stated is not None:
        if stated not in ("fp8", "bf16"):
            raise Unpredictable(f"extra.experts_compute {stated!r}: must be fp8 or bf16")
        return f"mxfp4/{stated}"
    w4a8 = hardware_family(case.hardware) == "blackwell" and engine_family(case.engine) == "trtllm"
    return "mxfp4/fp8" if w4a8 else "mxfp4/bf16"


EP_SOURCES = (
    "trtllm-perf-overview-v1.0",
)  # sources whose MoE runs pass --ep without stating it (module docstring)


ASSUMED_DP_NOTE = "attention data parallel assumed"  # marks a row predicted on an assumed layout
# marks a row whose run drafted tokens with MTP, predicted without them (``trtllm_limits``); scored
# with the assumed layouts, as disaggregated MTP runs are (data/README.md)
UNSIMULATED_MTP_NOTE = "MTP not simulated"


def length_range_ratio(case: Case) -> float | None:
    """``extra.length_range_ratio`` r when the harness drew each request's lengths uniformly from
    [r L, L] of the stated ones (vLLM-style ``benchmark_serving --random-range-ratio r``, which
    InferenceX runs with 0.8: ``.github/workflows/benchmark-tmpl.yml`` ``RANDOM_RANGE_RATIO``,
    ``kimbochen/bench_serving`` ``sample_random_requests``); their mean (1 + r) / 2 L is what a
    closed loop of many requests serves. None when the row states fixed lengths."""
    r = case.extra.get("length_range_ratio")
    if isinstance(r, bool) or not isinstance(r, int | float) or not 0 <= r < 1:
        return None
    return float(r)


def adp_balance(case: Case) -> tuple[int, int]:
    """``extra.attention_dp_balance`` [timeout_iters, batching_wait_iters]: the run started
    TensorRT-LLM with ``attention_dp_config.enable_balance`` (an InferenceX recipe, data/README.md;
    ``sched/admission.py`` ``AdpBalance``); () when the row does not say so."""
    v = case.extra.get("attention_dp_balance")
    if v is None:
        return ()
    if (
        not isinstance(v, list)
        or len(v) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        or v[0] < 1
        or v[1] < 0
    ):
        raise Unpredictable(
            f"extra.attention_dp_balance {v!r}: must be [timeout_iters >= 1, batching_wait_iters "
            ">= 0]"
        )
    return (v[0], v[1])


def batch_wait(case: Case) -> tuple[int, float]:
    """``extra.batch_wait`` [timeout_iters, max_tokens_ratio]: the run started TensorRT-LLM with
    ``batch_wait_timeout_iters`` and ``batch_wait_max_tokens_ratio`` (an InferenceX recipe,
    data/README.md; ``sched/admission.py`` ``BatchWait``); () when the row does not say so."""
    v = case.extra.get("batch_wait")
    if v is None:
        return ()
    if (
        not isinstance(v, list)
        or len(v) != 2
        or isinstance(v[0], bool)
        or not isinstance(v[0], int)
        or v[0] < 1
        or not isinstance(v[1], int | float)
        or not 0 <= v[1] <= 1
    ):
        raise Unpredictable(
            f"extra.batch_wait {v!r}: must be [timeout_iters >= 1, max_tokens_ratio in [0, 1]]"
        )
    return (v[0], float(v[1]))


def trtllm_limits(case: Case) -> tuple[int | None, int] | None:
    """(running limit or None, token budget) per rank from ``extra.max_batch_size`` /
    ``extra.max_num_tokens``: the run started ``trtllm-serve`` with ``--max_num_tokens`` and, where
    given, ``--max_batch_size`` (an InferenceX recipe, data/README.md); None when the row does not
    say so. With ``extra.mtp`` k, TensorRT-LLM's scheduler counts 1 + k tokens of the budget per
    generation request (``cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp``
    ``MicroBatchScheduler::operator()``: ``reqBeamWidth + getNumDraftTokens()``), the recipe
    sizing the budget for ``max_batch_size`` of them beside one prompt; the simulator runs one
    token per decoding sequence (the drafts are not simulated), so its budget is the recipe's
    less k per seat."""
    b, m, k = (case.extra.get(key) for key in ("max_batch_size", "max_num_tokens", "mtp"))
    if b is None and m is None:
        return None
    k = 0 if k is None else k
    seats = 1 if b is None and not k else b
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (seats, m, k)) or not (
        seats >= 1 and k >= 0 and m > k * seats
    ):
        raise Unpredictable(
            f"extra.max_batch_size {b!r} / extra.max_num_tokens {m!r} / extra.mtp {k!r}: must be "
            "integers, max_batch_size >= 1 (given with mtp), mtp >= 0, max_num_tokens > mtp * "
            "max_batch_size"
        )
    return b, m - k * seats


# trtllm-bench sizes the engine's limits itself when the run passes none: the v0.17 perf overview
# builds each engine with `trtllm-bench build --dataset` ("Reproducing Benchmarked Results",
# docs/source/performance/perf-overview.md @258c7540), whose tensorrt_llm/bench/build/build.py
# get_benchmark_engine_settings runs, for FP8 and unquantized builds, tuning.py
# calc_engine_setting (the KV requests that fit in 0.95 of the memory the weights leave: weights
# at 1 byte for fp8, else 2, in 1e9-byte units; KV at 1 byte for fp8, else 2, at least one KV head
# per TP rank) and finetune_setting (batch to 4,096 and tokens to 32,768, rounded up, at least 64
# and 2,048), not trtllm-build's 2,048 / 8,192. The PyTorch flow's `trtllm-bench throughput`
# sizes its limits the same way (bench/benchmark/utils/general.py get_settings) in versions whose
# inputs moved (NVFP4 weights, the run's KV fraction): applied to the v0.20, v1.0 and latest rows
# it cost their throughput rows (docs/history/validation.md, "trtllm-bench's own limits"), so
# they keep the preset until those versions' rules are pinned.
BENCH_KV_FRACTION = 0.95  # calc_engine_setting's kv_cache_gpu_mem_fraction default
BENCH_MAX_BATCH, BENCH_MAX_TOKENS = 4096, 32768  # finetune_setting's caps


def trtllm_bench_limits(
    case: Case, model: ModelSpec, memory_bytes: float, tp: int, pp: int, kv: str
) -> tuple[int, int] | None:
    """(max_batch_size, max_num_tokens) trtllm-bench built the engine of an offline row with
    (the comment above); None when it does not apply: another harness, flow or scenario, stated
    limits, MLA attention (whose heads trtllm-bench counts from the checkpoint's config, not as
    cached), or a KV estimate under one request."""
    lengths = case.input_tokens, case.output_tokens
    if (
        case.scenario != "offline"
        or "trtllm-bench" not in case.engine
        or not trtllm_engine_flow(case.engine)  # the PyTorch flow: the comment above
        or trtllm_limits(case) is not None
        or model.attention.kind == "mla"
        or not all(isinstance(x, int) and x > 0 for x in lengths)
    ):
        return None
    isl, osl = lengths
    weights_gib = model.total_params / 1e9 * (1.0 if case.weights == "fp8" else 2.0)
    heads = max(tp, model.attention.num_kv_heads)
    per_token_gib = 2 * model.num_layers * heads * model.attention.head_dim / GiB
    per_token_gib *= 1.0 if kv == "fp8" else 2.0
    free_gib = memory_bytes * tp * pp / GiB - weights_gib
    requests = free_gib * BENCH_KV_FRACTION / (per_token_gib * (isl + osl))
    if requests < 1:
        return None
    raw_bs = min(requests, BENCH_MAX_BATCH) / pp
    raw_tokens = min(raw_bs * (1 + isl / osl), BENCH_MAX_TOKENS)
    bs = _round_up_tiered(raw_bs, ((256, 32), (1024, 128), (math.inf, 256)), 64)
    tokens = _round_up_tiered(raw_tokens, ((4096, 256), (8192, 512), (math.inf, 1024)), 2048)
    return bs, tokens


def _round_up_tiered(value: float, tiers: tuple[tuple[float, int], ...], floor: int) -> int:
    """``value`` rounded up to the step of the first ``(below, step)`` tier it is under, and at
    least ``floor`` (trtllm-bench's ``finetune_setting`` rounding of the batch size and the token
    budget; the floor binds only in the first tier)."""
    step = next(step for below, step in tiers if value < below)
    return max(floor, step * math.ceil(value / step))


def recipe_free_fraction(case: Case) -> float | None:
    """``extra.free_gpu_memory_fraction``: the run started TensorRT-LLM with that
    ``kv_cache_config.free_gpu_memory_fraction`` (an InferenceX recipe, data/README.md), which
    replaces the preset's; None when the row does not say so."""
    v = case.extra.get("free_gpu_memory_fraction")
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
        raise Unpredictable(f"extra.free_gpu_memory_fraction {v!r}: must be in (0, 1]")
    return float(v)


def async_scheduling(case: Case) -> bool:
    """``extra.vllm_async_scheduling``: the run's vLLM scheduled each step while the one before it
    ran (``--async-scheduling``, or the default from v0.14: an InferenceX recipe, data/README.md);
    False when the row does not say so (vLLM's default before v0.14)."""
    v = case.extra.get("vllm_async_scheduling", False)
    if not isinstance(v, bool):
        raise Unpredictable(f"extra.vllm_async_scheduling {v!r}: must be a boolean")
    return v


MIXED_PRESET = "sglang-0.5-mixed"  # SGLang with --enable-mixed-chunk (data/engines)


def sglang_server_args(case: Case) -> tuple[bool, int]:
    """(``extra.sglang_mixed_chunk``, ``extra.max_prefill_tokens``): the run started SGLang with
    ``--enable-mixed-chunk`` and that ``--max-prefill-tokens`` (an aiconfigurator-generated
    deployment, data/README.md), so it is predicted on :data:`MIXED_PRESET` with that cap;
    (False, 0) when the row does not say so."""
    mixed = case.extra.get("sglang_mixed_chunk", False)
    cap = case.extra.get("max_prefill_tokens", 0)
    if not isinstance(mixed, bool) or isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise Unpredictable(
            f"extra.sglang_mixed_chunk {mixed!r} / extra.max_prefill_tokens {cap!r}: must be a "
            "boolean and an integer >= 0"
        )
    return mixed, cap


NO_RADIX_PRESET = "sglang-0.5-no-radix"  # SGLang with --disable-radix-cache (data/engines)
LAUNCH_KEYS = {  # SGLang launch flags a row's recipe set: extra key -> what it must be
    "mem_fraction_static": "a fraction in (0, 1]",
    "chunked_prefill_size": "an integer >= 1",
    "max_running_requests": "an integer >= 1",
    "sglang_disable_radix_cache": "a boolean",
}


def _launch_value_ok(key: str, v) -> bool:
    if key == "sglang_disable_radix_cache":
        return isinstance(v, bool)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return 0 < v <= 1 if key == "mem_fraction_static" else isinstance(v, int) and v >= 1


def sglang_launch(case: Case) -> dict:
    """The SGLang launch flags the row's recipe set (an InferenceX script, data/README.md):
    ``extra.mem_fraction_static``, ``extra.chunked_prefill_size``, ``extra.max_running_requests``
    and ``extra.sglang_disable_radix_cache`` (``--disable-radix-cache``: with the benchmark
    client's ``ignore_eos`` the run admits by ``sglang-ignore-eos``, :data:`NO_RADIX_PRESET`);
    only those present."""
    out = {}
    for key, what in LAUNCH_KEYS.items():
        v = case.extra.get(key)
        if v is None:
            continue
        if not _launch_value_ok(key, v):
            raise Unpredictable(f"extra.{key} {v!r}: must be {what}")
        out[key] = v
    return out


def unshardable_tp(model: str, tp: int) -> str | None:
    """The note for a TP size that cannot shard the model's attention heads (engines refuse it,
    :func:`~infercast.specs.parallel.check_attention_split`): such a row ran attention data
    parallel over its GPUs (with the experts spread over all of them: the wide-EP layout), so
    it is predicted that way and marked. None when the split is fine or the model is unknown."""
    try:
        spec = load_model(model)
    except InfercastError:
        return None  # an unknown model is reported where the row is planned
    problem = attention_split_problem(spec, tp)
    if problem is None:
        return None
    experts = ", experts over all of them" if spec.moe is not None else ""
    return (
        f"{ASSUMED_DP_NOTE}: {problem}, so the run did not shard them; predicted as one aggregated "
        f"attention-data-parallel replica over the {tp} GPUs{experts} (the wide-EP layout; the run "
        "may have been disaggregated, which the row does not say)"
    )


def is_moe(model: str) -> bool:
    try:
        return load_model(model).moe is not None
    except InfercastError:
        return False


def layout(case: Case, engine: EnginePreset | None = None) -> Layout:
    """Resolve parallelism, replicas, precision and engine limits, or raise Unpredictable."""
    if not case.model:
        raise Unpredictable("the row names no model")
    if not case.weights:
        raise Unpredictable("the source does not state the weight precision")
    n = case.n_gpus
    if case.tp is None and n not in (None, 1):
        raise Unpredictable(
            f"the source does not state the parallel layout of its {n} GPUs (tp/pp/ep)"
        )
    tp, pp, ep = case.tp or 1, case.pp or 1, case.ep or 1
    notes = []
    ran = case.extra.get("n_gpus_ran")
    if ran:  # the import counted the GPUs twice (data/README.md, benchmarks/annotate_inferencex.py)
        if tp == n:
            tp = ran
        notes.append(f"n_gpus={n} counts the GPUs twice: the run used {ran} (tp={tp}, ep={ep})")
        n = ran
    if case.ep is None and tp > 1 and case.source in EP_SOURCES and is_moe(case.model):
        ep = tp
        notes.append(
            f"ep not stated: ep={tp}, experts split over the TP group (the source runs MoE models "
            "with --ep)"
        )
    attn_dp = ep > tp * pp
    unshardable = None if attn_dp or pp > 1 or tp == 1 else unshardable_tp(case.model, tp)
    if unshardable:
        attn_dp, ep = True, (tp if is_moe(case.model) else ep)
        notes.append(unshardable)
    elif attn_dp:
        if ep % pp:
            raise Unpredictable(f"ep={ep} is not a multiple of pp={pp}")
        notes.append(
            f"ep={ep} > tp*pp={tp * pp}: attention data parallel over {ep // pp} GPUs "
            f"(tp={ep // pp}, attn_dp)"
        )
        tp = ep // pp
    per = tp * pp
    n = n or per
    if n % per:
        raise Unpredictable(
            f"n_gpus={n} is not a multiple of the {per} GPUs of one replica (tp*pp)"
        )
    mixed, prefill_cap = sglang_server_args(case)
    if engine is None and mixed and engine_family(case.engine) == "sglang":
        engine = load_engine(MIXED_PRESET)
        notes.append(
            "SGLang started with --enable-mixed-chunk"
            + (f" and --max-prefill-tokens {prefill_cap}" if prefill_cap else "")
            + " (the run's generated deployment): decodes ride in every prefill step"
        )
    launch = sglang_launch(case) if engine_family(case.engine) == "sglang" else {}
    if engine is None and not mixed and launch.get("sglang_disable_radix_cache"):
        engine = load_engine(NO_RADIX_PRESET)
        notes.append(
            "SGLang started with --disable-radix-cache (the run's recipe), its client sending "
            "ignore_eos: a request starts only when every running one can still finish"
        )
    preset = row_preset(case, case.hardware, tp * pp, engine)
    if preset is not None and not prefill_cap:
        prefill_cap = preset.max_prefill_tokens
    seqs, tokens = (preset.max_num_seqs, preset.max_num_batched_tokens) if preset else OTHER_LIMITS
    if (
        preset is not None
        and preset.engine == "sglang"
        and len(launch) > ("sglang_disable_radix_cache" in launch)
    ):
        seqs = launch.get("max_running_requests", seqs)
        tokens = launch.get("chunked_prefill_size", tokens)
        preset = preset.model_copy(
            update={"memory_fraction": launch.get("mem_fraction_static", preset.memory_fraction)}
        )
        notes.append(
            "SGLang launch flags of the run's recipe: "
            + ", ".join(f"{k} {v}" for k, v in launch.items() if k != "sglang_disable_radix_cache")
        )
    weights, kv, experts = case.weights, kv_dtype(case), checkpoint_experts(case)
    if experts:  # the checkpoint quantizes no KV: 16 bits unless the row or its recipe says
        weights = "bf16"
        kv = kv if case.kv_cache or case.extra.get("kv_cache_dtype") else "bf16"
        notes.append(
            f"{case.model} served from its MXFP4 checkpoint: experts {experts} (format/compute), "
            f"the rest bf16, KV {kv}"
        )
    trtllm = engine_family(case.engine) == "trtllm"
    limits = trtllm_limits(case) if trtllm else None
    if limits is not None:
        # a generation request takes at least one token of the budget (microBatchScheduler.cpp
        # stops scheduling when the next one would pass it), so no more run than the budget
        seqs, tokens = min(limits[0] or seqs, limits[1]), limits[1]
        notes.append(
            "the run's recipe started TensorRT-LLM with "
            + (f"--max_batch_size {seqs} and " if limits[0] else "")
            + f"--max_num_tokens {case.extra['max_num_tokens']} per rank"
            + (
                f", with MTP ({case.extra['mtp']} draft tokens; {UNSIMULATED_MTP_NOTE}: {tokens} "
                "tokens left to one token per running sequence)"
                if case.extra.get("mtp")
                else ""
            )
        )
    bench = None
    if trtllm and limits is None and not attn_dp and not experts:  # MXFP4: not a tuned quant
        try:
            bench = trtllm_bench_limits(
                case,
                load_model(case.model),
                load_hardware(case.hardware).memory_bytes,
                tp,
                pp,
                kv,
            )
        except InfercastError:
            bench = None  # an unknown model or part is reported where the row is planned
    if bench is not None:
        seqs, tokens = bench
        notes.append(
            f"trtllm-bench's own limits for these lengths: max_batch_size {seqs}, max_num_tokens "
            f"{tokens} (bench/build/tuning.py finetune_setting)"
        )
    if trtllm and attn_dp:  # per-rank limits (module docstring): the replica holds tp ranks
        seqs, tokens = seqs * tp, tokens * tp
    free = preset.memory_fraction if preset and preset.memory_rule == "free" else 0.0
    stated_free = recipe_free_fraction(case) if trtllm and free else None
    if stated_free is not None:
        free = stated_free
        notes.append(
            f"KV cache: {free:g} of the memory left free (the run's recipe, "
            "kv_cache_config.free_gpu_memory_fraction)"
        )
    fraction = (
        preset.memory_fraction if preset and preset.memory_rule == "total" else MEMORY_FRACTION
    )
    chunked_as_full = trtllm and hardware_family(case.hardware) != "blackwell"
    setup = Setup(
        case.model,
        case.hardware,
        weights,
        kv,
        tp,
        pp,
        ep,
        seqs,
        tokens,
        attn_dp,
        experts,
        free,
        chunked_as_full=chunked_as_full,
        memory_fraction=fraction,
        policy=preset.policy if preset else "chunked",
        admission=preset.admission if preset else "current-use",
        admission_params=tuple(preset.admission_params.items())
        if preset and preset.admission in SGLANG_RULES
        else (),
        max_prefill_tokens=prefill_cap if preset and preset.engine == "sglang" else 0,
    )
    balance = adp_balance(case) if attn_dp and trtllm else ()
    if balance:
        setup = replace(setup, adp_balance=balance)
        notes.append(
            f"attention-DP balance (the run's recipe): new requests wait for every one of the {tp} "
            f"ranks to have one, at most {balance[0]} iterations, then {balance[1]} more"
        )
    wait = batch_wait(case) if trtllm and not attn_dp else ()
    if wait:  # PyExecutor._schedule waits for a batch only without attention DP
        setup = replace(setup, batch_wait=wait)
        notes.append(
            f"batch waiting (the run's recipe): new requests wait until they and the decodes fill "
            f"{wait[1]:g} of the token budget, at most {wait[0]} iterations"
        )
    if engine_family(case.engine) == "vllm" and async_scheduling(case):
        setup = replace(setup, async_scheduling=True)
        notes.append(
            "async scheduling (the run's vLLM): a request arriving while a step runs joins the "
            "step after the next one"
        )
    r = length_range_ratio(case)
    if r is not None:
        notes.append(
            f"lengths drawn uniformly from [{r:g} L, L] of the stated ones (the harness's random "
            f"dataset): their mean, {(1 + r) / 2:g} L, predicted"
        )
    return Layout(setup, n // per, n, tuple(notes))


def engine_model(model: ModelSpec, setup: Setup) -> ModelSpec:
    """``model`` as the setup's engine runs it: under ``chunked_as_full`` (TensorRT-LLM, module
    docstring) its chunked-attention layers attend to the whole context, as its decode does."""
    if not setup.chunked_as_full or all(layer.attention != ATTN_CHUNKED for layer in model.layers):
        return model
    layers = tuple(
        replace(layer, attention=ATTN_FULL, window=0) if layer.attention == ATTN_CHUNKED else layer
        for layer in model.layers
    )
    return replace(model, layers=layers)
