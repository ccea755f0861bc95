"""Achieved-efficiency factors: what separates the *expected* time from the physics *floor*.

Every factor is explicit, named and documented here; defaults are taken from
public measurements (``data/hardware_measured.csv``) and are refitted by
``infercast calibrate`` (a profile TOML with the same field names).

Expected time of an op = max(FLOPs / (peak * compute_eff), bytes / (bandwidth * mem_eff)),
summed over ops, plus communication and a fixed per-step overhead.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from infercast.errors import ConfigError
from infercast.validation import check_number


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
    - ``request_overhead_s`` 0 (off): serving-stack latency per request that a benchmark
      client's TTFT includes and no engine step does (HTTP and SSE framing, chat template and
      tokenization, hand-off to the engine process, first-token detokenization). Not a step
      cost: ``StepModel`` ignores it; ``infercast validate`` adds it to the TTFT of benchmark
      (fixed-concurrency) rows, and ``infercast calibrate`` fits it per engine group. Published
      client-side overheads: 40-200 ms for vLLM's benchmark_serving.py
      (tenstorrent/tt-inference-server#190, #259), 50 ms for Ray Serve's response batcher
      (ray-project/ray#59681).
    """

    gemm_compute_eff: float = 0.75
    gemm_compute_eff_8bit: float = 0.70
    gemm_m_half: float = 16.0
    mem_bw_eff: float = 0.80
    attn_bw_eff: float = 0.70
    attn_compute_eff: float = 0.55
    elementwise_bw_eff: float = 0.60
    comm_bw_eff: float = 0.75
    comm_latency_s: float = 10e-6
    step_overhead_s: float = 1e-3
    layer_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    name: str = "builtin"  # the code's values (`--profile builtin`); a calibrated set names itself

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                continue
            # finite (NaN and inf pass a bare `value < 0` test), a number (not true), >= 0
            check_number(value, f"efficiency profile field {f.name}", 0.0,
                         fix="give a finite number >= 0")
            if f.name.endswith("_eff") and not 0 < value <= 1:
                raise ConfigError(f"efficiency profile field {f.name}={value!r} must be in (0, 1]")

    def gemm_eff(self, compute_dtype: str, m_tokens: float) -> float:
        """Achieved fraction of peak for a GEMM with ``m_tokens`` rows."""
        base = self.gemm_compute_eff_8bit if compute_dtype in ("fp8", "int8", "fp4") else self.gemm_compute_eff
        return base * m_tokens / (m_tokens + self.gemm_m_half)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_updates(self, **kw: Any) -> EfficiencyProfile:
        return replace(self, **kw)


FIELD_NAMES = tuple(f.name for f in fields(EfficiencyProfile) if f.name != "name")


def load_profile(path: str | Path | None) -> EfficiencyProfile:
    """Read a profile TOML (as written by ``infercast calibrate``); None gives the defaults.

    The file may hold top-level fields, and an optional ``[profile]`` table.
    Unknown keys are an error so a typo cannot silently keep a default.
    """
    if path is None:
        return EfficiencyProfile()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read profile {p}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"profile {p} is not valid TOML: {exc}") from None
    data = data.get("profile", data)
    values = {k: v for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    unknown = sorted(set(values) - set(FIELD_NAMES))
    if unknown:
        raise ConfigError(f"profile {p} has unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELD_NAMES)}")
    return EfficiencyProfile(name=str(data.get("name", p.stem)), **{k: float(v) for k, v in values.items()})
