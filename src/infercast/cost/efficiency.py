"""Achieved-efficiency factors: what separates the *expected* time from the physics *floor*.

Every factor is explicit, named and documented here; defaults are taken from
public measurements (``data/hardware_measured.csv``) and are refitted by
``infercast calibrate`` (a profile TOML with the same field names).

Expected time of an op = max(FLOPs / (peak * compute_eff), bytes / (bandwidth * mem_eff)),
summed over ops, plus communication and a fixed per-step overhead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from infercast.errors import ConfigError
from infercast.validation import check_number


def _eff(default: float, low: float, high: float, why: str):
    """A profile field: its default and its physical range (``low``, ``high``, ``why``)."""
    return field(default=default, metadata={"range": (low, high), "why": why})


@dataclass(frozen=True, slots=True)
class EfficiencyProfile:
    """Fractions of peak achieved by each kind of work, and fixed overheads.

    Defaults and where they come from:
    - ``gemm_compute_eff`` 0.75: large bf16 GEMMs reach 0.80 (H100 SXM), 0.78 (B200),
      0.87 (A100) of spec in the MAMF-finder measurements; model-shaped GEMMs run a
      little below the best shape.
    - ``gemm_compute_eff_8bit`` 0.70: fp8 MAMF 0.71 (H100), 0.73 (H200), 0.76 (B200).
    - ``gemm_m_half`` 16 tokens: GEMM efficiency falls as M (tokens in the step) shrinks
      below the tensor-core tile; modelled as eff * M / (M + m_half).
    - ``gemm_small_max_tokens`` 0 (off), ``gemm_small_peak_ratio`` 0.75, ``gemm_small_m_half``
      16: products of at most ``gemm_small_max_tokens`` rows follow their own curve
      ``gemm_small_peak_ratio * M / (M + gemm_small_m_half)`` of the compute dtype's peak, for
      an engine that runs them on other kernels than its large products: the CPU engine's
      products of up to 48 tokens run the weight format's own loops (numba; PyTorch's int8 and
      bf16 kernels) and OpenBLAS's small-M path, larger ones widen the matrix to float32 and
      run OpenBLAS's GEMM (``engine/qlinear.py`` ``KERNEL_MAX_TOKENS``); one curve through both
      bent to neither (SmolLM2 fp32, 2026-12-04: 16-32-token products 1.2-1.4x above it,
      128-512-token ones 0.80-0.85x below). The ratio may pass 1: those loops multiply in a
      narrower type than the float32 the profile is priced at (the q4 kernel's int8 dot
      products, AVX-512 BF16). ``infercast machine`` fits both (``engine/profile_fit.py``).
    - ``mem_bw_eff`` 0.80: weight streaming in decode reaches ~0.8 of spec in tuned
      engines (gpt-fast reports ~1.7 of 2.04 TB/s on A100 = 0.83).
    - ``attn_bw_eff`` 0.70 and ``attn_compute_eff`` 0.55: paged decode attention reads
      scattered blocks; FlashAttention-2/3 prefill reaches 50-75% of the tensor peak.
    - ``elementwise_bw_eff`` 0.60: norms, activations, embedding gathers (small kernels).
    - ``comm_bw_eff`` 0.75 and ``comm_latency_s`` 10 us: NCCL ring all-reduce on NVLink
      reaches ~0.75 of the unidirectional link (p2pBandwidthLatencyTest 0.74-0.75 on H100).
    - ``step_overhead_s`` 1 ms: scheduling, sampling, launch gaps per engine step.
    - ``layer_overhead_s`` 0 (off): a fixed cost per decoder layer and step, for what
      scales with depth rather than with bytes or FLOPs: the ~10-15 kernel boundaries of a
      layer (launch, grid drain and ramp-up between dependent kernels, even inside CUDA
      graphs; TensorRT-LLM's programmatic dependent launch, ``TRTLLM_ENABLE_PDL``, exists to
      overlap them). ``StepModel`` charges ``step_overhead_s + layer_overhead_s * layers``
      once per step. Fitted by ``infercast calibrate`` when listed in its fields.
    - ``token_overhead_s`` 0 (off): the serving loop's work per sampled (streamed) token that
      is no part of the forward pass: sampling over the vocabulary, detokenizing and stop checks,
      the token's event and its SSE chunk. ``StepModel`` charges it once per logit row of a step
      (the rows that sample). ``infercast machine`` measures it on the CPU engine's own code
      (``engine/serve_probe.py``); engines whose per-token work overlaps the forward leave it 0.
    - ``widen_step_s`` 0 (off) and ``widen_min_tokens`` 48: a fixed cost of every step with
      more than ``widen_min_tokens`` new tokens, whatever their number: the CPU engine's
      compact formats widen each matrix to float32 once in such a step and run OpenBLAS on it
      (``engine/qlinear.py`` ``KERNEL_MAX_TOKENS``), work that does not grow with the tokens,
      so the GEMM curve cannot carry it (it priced a 128-token step as a share of a 512-token
      one). ``infercast machine`` measures it (``engine/rate_probe.py`` ``widen_layer_s``).
    - ``multi_token_step_s`` 0 (off): a fixed cost of every step with more than one new token
      beyond a one-token step's: the CPU engine ran a one-token step of q4, int8 or bf16 layers
      as one compiled call per thread (``engine/decode_step.py``), a step of more tokens layer
      by layer in Python and numpy (SmolLM2's 30 layers at tiny widths, bf16, 2026-12-05: 0.07
      ms at one token, 1.1 ms at two to four). Since 2026-12-05 (``batchfuse``) a decode step
      of several requests (one token each) is one compiled call too; ``infercast machine``
      measures what such a step adds (``engine/rate_probe.py`` ``overhead_point`` at batch 2),
      and steps with a prefill, still layer by layer, are charged the same (their ~1 ms more is
      small beside a prefill chunk's time).
    - ``request_admit_s`` 0 (off): the serving front end's work to admit one request (parse
      and validate its body, tokenize the prompt, hand it to the engine), done one request at a
      time on one event loop. Not a step cost: the simulator's closed-loop clients' requests
      reach the engine that long after they are sent, each behind the ones before it
      (``sim/run.py``), so a burst's first request starts a step alone and a finished request's
      successor misses the step that starts at once, as served (but the loop's first burst
      reaches the idle engine together, once admitted) (``infercast machine`` measures
      it on the CPU engine's server code, ``engine/serve_probe.py``). TTFT is still counted
      from the send.
    - ``request_overhead_s`` 0 (off): serving-stack latency per request that a benchmark
      client's TTFT includes and no engine step does (HTTP and SSE framing, chat template and
      tokenization, hand-off to the engine process, first-token detokenization). Not a step
      cost: ``StepModel`` ignores it; ``infercast validate`` adds it to the TTFT of benchmark
      (fixed-concurrency) rows, and ``infercast calibrate`` fits it per engine group, then
      refits it on the simulated path that ``validate`` defaults to (``validate/simfit.py``).
      Published client-side overheads:
      40-200 ms for vLLM's benchmark_serving.py (tenstorrent/tt-inference-server#190, #259),
      50 ms for Ray Serve's response batcher (ray-project/ray#59681).
    """

    # Each field: its default, and the physical range a calibration may move it in, with the
    # reason (``PHYSICAL_RANGES``; ``infercast calibrate`` fits inside them and lists the fields
    # that end on a bound: a bound that binds names a mechanism to model, not to absorb).
    gemm_compute_eff: float = _eff(
        0.75,
        0.40,
        0.87,
        "at most the best measured bf16 GEMM (A100 SXM MAMF 0.87 of spec, "
        "data/hardware_measured.csv); at least about half the part's best (MI300X's best is 0.51): "
        "lower is a cost the model lacks",
    )
    gemm_compute_eff_8bit: float = _eff(
        0.70,
        0.35,
        0.78,
        "at most the best measured fp8 GEMM (GH200 MAMF 0.78, B200 0.76); at least about half of "
        "it",
    )
    gemm_m_half: float = _eff(
        16.0,
        2.0,
        128.0,
        "tokens where a GEMM reaches half its efficiency: between a few rows and the largest "
        "tensor-core tile M (64-128 in CUTLASS/cuBLAS kernels)",
    )
    gemm_small_max_tokens: float = _eff(
        0.0,
        0.0,
        65536.0,
        "rows up to which a product runs the engine's small-product kernels (the CPU engine: "
        "engine/qlinear.py KERNEL_MAX_TOKENS, 48); 0: one curve for every product",
    )
    gemm_small_peak_ratio: float = _eff(
        0.75,
        0.05,
        8.0,
        "the small products' compute ceiling over the compute dtype's peak: above 1 where they "
        "multiply in a narrower type (int8 dot products: 4x float32's lanes per instruction)",
    )
    gemm_small_m_half: float = _eff(
        16.0,
        0.0,
        128.0,
        "tokens where a small product reaches half its ceiling: from 0 (flat) to the largest tile",
    )
    mem_bw_eff: float = _eff(
        0.80,
        0.45,
        0.85,
        "at most a tuned GEMV's share of HBM spec (gpt-fast 1.7 of 2.04 TB/s on A100 = 0.83; best "
        "measured achieved bandwidth in data/hardware_measured.csv 0.79); at least gpt-fast's bf16 "
        "TP4 decode (0.47)",
    )
    attn_bw_eff: float = _eff(
        0.70,
        0.30,
        0.85,
        "paged KV reads: no faster than weight streaming (mem_bw_eff's ceiling); at least 0.3 "
        "(scattered 16-token blocks)",
    )
    attn_compute_eff: float = _eff(
        0.55,
        0.20,
        0.75,
        "at most FlashAttention-3's 75 % of the H100 bf16 peak (Shah et al. 2024); at least 0.2 "
        "(short prompts)",
    )
    elementwise_bw_eff: float = _eff(
        0.60, 0.20, 0.85, "small memory-bound kernels: at most mem_bw_eff's ceiling; at least 0.2"
    )
    comm_bw_eff: float = _eff(
        0.75,
        0.35,
        0.90,
        "at most the best measured link use (H200 nvbandwidth 0.88 of the NVLink spec); at least "
        "0.35, about what NCCL all-reduce of a decode step's few-MB messages reaches on NVLink (a "
        "judgment: no all-reduce measurement ships yet)",
    )
    comm_latency_s: float = _eff(
        10e-6,
        2e-6,
        50e-6,
        "one all-reduce's fixed cost on NVLink: a few us (NCCL LL protocol) to tens of us",
    )
    step_overhead_s: float = _eff(
        1e-3,
        1e-4,
        10e-3,
        "scheduling, sampling and launch per engine step: 0.1 ms (CUDA graphs) to 10 ms "
        "(Python-bound)",
    )
    layer_overhead_s: float = _eff(
        0.0, 0.0, 1e-4, "~10-15 kernel boundaries per layer at ~1.5-5 us each: at most 100 us"
    )
    token_overhead_s: float = _eff(
        0.0,
        0.0,
        1e-3,
        "sampling, detokenizing and streaming one token on the CPU (greedy sampling over a "
        "49,152-token vocabulary and its SSE chunk: ~0.1 ms on one Zen 5 core, engine/"
        "serve_probe.py): at most 1 ms",
    )
    widen_step_s: float = _eff(
        0.0,
        0.0,
        2.0,
        "widening a model's compact matrices to float32 once a step: ~8 Gweights/s a core "
        "for 4-bit on the Zen 5 (engine/widen.py), ~1 before 2026-12-05; at most 2 s",
    )
    widen_min_tokens: float = _eff(
        48.0,
        1.0,
        65536.0,
        "tokens in a step beyond which the engine widens (engine/qlinear.py KERNEL_MAX_TOKENS)",
    )
    multi_token_step_s: float = _eff(
        0.0,
        0.0,
        0.1,
        "a step of several tokens against a one-token step (engine/decode_step.py): ~1 ms for "
        "30 layers on one Zen 5 core layer by layer, less as one compiled call",
    )
    request_admit_s: float = _eff(
        0.0,
        0.0,
        0.05,
        "one request's parse, validation, tokenization and hand-off on the server's event loop: "
        "~0.1-1 ms for a 128-token prompt (engine/serve_probe.py); at most 50 ms",
    )
    request_overhead_s: float = _eff(
        0.0,
        0.0,
        0.30,
        "serving stack per request: published client-side overheads are 40-200 ms (below); 300 ms "
        "at most",
    )
    name: str = "builtin"  # the code's values (`--profile builtin`); a calibrated set names itself

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                continue
            # finite (NaN and inf pass a bare `value < 0` test), a number (not true), >= 0
            check_number(
                value, f"efficiency profile field {f.name}", 0.0, fix="give a finite number >= 0"
            )
            if f.name.endswith("_eff") and not 0 < value <= 1:
                raise ConfigError(f"efficiency profile field {f.name}={value!r} must be in (0, 1]")

    def gemm_eff(self, compute_dtype: str, m_tokens: float) -> float:
        """Achieved fraction of peak for a GEMM with ``m_tokens`` rows (its own curve at most
        ``gemm_small_max_tokens`` rows)."""
        if m_tokens <= self.gemm_small_max_tokens:
            return self.gemm_small_peak_ratio * m_tokens / (m_tokens + self.gemm_small_m_half)
        base = (
            self.gemm_compute_eff_8bit
            if compute_dtype in ("fp8", "int8", "fp4")
            else self.gemm_compute_eff
        )
        return base * m_tokens / (m_tokens + self.gemm_m_half)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def out_of_range(self, rel: float = 1e-6) -> list[str]:
        """``"field=value (range low-high)"`` for every field outside its physical range."""
        out = []
        for name, (lo, hi, _) in PHYSICAL_RANGES.items():
            v = getattr(self, name)
            if v < lo * (1 - rel) or v > hi * (1 + rel):
                out.append(f"{name}={v:.4g} (range {lo:g}-{hi:g})")
        return out

    def with_updates(self, **kw: Any) -> EfficiencyProfile:
        return replace(self, **kw)


FIELD_NAMES = tuple(f.name for f in fields(EfficiencyProfile) if f.name != "name")
# field -> (low, high, reason): where a calibration may move it (the fields' definitions above)
PHYSICAL_RANGES = {
    f.name: (*f.metadata["range"], f.metadata["why"])
    for f in fields(EfficiencyProfile)
    if f.name != "name"
}


def load_profile(path: str | Path | None) -> EfficiencyProfile:
    """Read a profile TOML (as written by ``infercast calibrate``); None gives the defaults.

    The file may hold top-level fields, and an optional ``[profile]`` table.
    Unknown keys are an error so a typo cannot silently keep a default.
    """
    if path is None:
        return EfficiencyProfile()
    from infercast.specs.catalog import read_toml

    p = Path(path)
    data = read_toml(p, "profile")
    data = data.get("profile", data)
    return EfficiencyProfile(
        name=str(data.get("name", p.stem)), **profile_fields(data, f"profile {p}")
    )


def profile_fields(values: dict[str, Any], where: str) -> dict[str, float]:
    """The profile fields of a parsed TOML table, as floats; other keys that hold numbers are
    an error naming ``where`` (a typo cannot silently keep a default), and so is a known field
    that holds text or a boolean. Keys holding anything else (``name``, tables) are left out."""
    for k, v in values.items():  # a known field as text or true is an error, not "not given"
        if k in FIELD_NAMES and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ConfigError(f"{where}: {k} = {v!r} is not a number; write e.g. {k} = 0.8")
    nums = {
        k: v for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    unknown = sorted(set(nums) - set(FIELD_NAMES))
    if unknown:
        raise ConfigError(
            f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELD_NAMES)}"
        )
    return {k: float(v) for k, v in nums.items()}
