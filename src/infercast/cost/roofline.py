"""Roofline timing of one op: the physics floor and the expected time, and what binds.

floor    = max(FLOPs / peak, compulsory bytes / bandwidth)           (Williams et al. 2009)
expected = max(FLOPs / (peak * compute_eff), bytes / (bandwidth * mem_eff))
comm     = link bytes / link bandwidth (+ latency per collective in expected)
"""

from __future__ import annotations

from dataclasses import dataclass

from infercast.cost.comm import transfer_time_s
from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.ops import ATTENTION, COMM, GEMM, OpCost

COMPUTE, MEMORY, LINK = "compute", "memory", "link"


@dataclass(frozen=True, slots=True)
class Machine:
    """The resources one GPU of a replica offers to the ledger."""

    peak_flops: float  # in the compute dtype of the matmuls
    attn_peak_flops: float  # 16-bit attention (fp8 with fp8 KV, fp32 with fp32 KV): StepModel
    bandwidth: float
    link_bandwidth: float
    compute_dtype: str
    expert_peak_flops: float = 0.0  # routed-expert GEMMs in their own dtype (0: same as peak_flops)
    expert_dtype: str = ""

    def gemm_peak_dtype(self, op: OpCost) -> tuple[float, str]:
        """(peak FLOP/s, compute dtype) a GEMM runs at: the experts' own for a routed-expert op."""
        if op.expert and self.expert_peak_flops > 0:
            return self.expert_peak_flops, self.expert_dtype
        return self.peak_flops, self.compute_dtype


@dataclass(frozen=True, slots=True)
class OpTime:
    """An op with its floor and expected time and the resource that binds it."""

    op: OpCost
    floor_s: float
    time_s: float
    bound: str


def _peak(op: OpCost, m: Machine) -> float:
    return m.attn_peak_flops if op.kind == ATTENTION else m.gemm_peak_dtype(op)[0]


def op_floor_s(op: OpCost, m: Machine) -> tuple[float, str]:
    """Physics floor of an op: nothing can run it faster."""
    if op.kind == COMM:
        return transfer_time_s(op.link_bytes, m.link_bandwidth, 0.0), LINK
    compute = op.flops / _peak(op, m)
    memory = op.compulsory_bytes / m.bandwidth
    return (compute, COMPUTE) if compute > memory else (memory, MEMORY)


def efficiencies(
    kind: str, eff: EfficiencyProfile, dtype: str = "", m_tokens: float = 0.0
) -> tuple[float, float]:
    """(compute, memory) efficiency factors an op of ``kind`` achieves: a GEMM its dtype's compute
    efficiency at ``m_tokens`` rows (``EfficiencyProfile.gemm_eff``) and ``mem_bw_eff``,
    attention its own pair, everything else (elementwise, gathers) the GEMM compute and
    elementwise bandwidth."""
    if kind == GEMM:
        return eff.gemm_eff(dtype, max(m_tokens, 1e-9)), eff.mem_bw_eff
    if kind == ATTENTION:
        return eff.attn_compute_eff, eff.attn_bw_eff
    return eff.gemm_compute_eff, eff.elementwise_bw_eff


def expected_s(
    flops: float, nbytes: float, peak: float, bandwidth: float, c_eff: float, b_eff: float
) -> tuple[float, str]:
    """The expected-time formula (module docstring): max(FLOPs / (peak c_eff), bytes / (bandwidth
    b_eff)) and what binds. Every timer uses it: :func:`op_expected_s` per op, and the step
    model's affine ops and attention function through :func:`expected_source`, the same formula
    as source for the functions ``cost/step.py`` generates (``_linear_fn``, ``_attention_fn``)."""
    compute = flops / (peak * c_eff)
    memory = nbytes / (bandwidth * b_eff)
    return (compute, COMPUTE) if compute > memory else (memory, MEMORY)


def expected_source(flops: str, nbytes: str, compute_rate: str, memory_rate: str) -> list[str]:
    """:func:`expected_s`'s time as source lines that add it to ``total``, for the step model's
    generated functions (``cost/step.py``): the expressions give an op's FLOPs and bytes and the
    achieved compute (peak x c_eff) and memory (bandwidth x b_eff) rates. The formula is written
    here once; ``tf if tf > tb else tb`` is ``expected_s``'s choice, without its label."""
    return [
        f"tf = ({flops}) / ({compute_rate})",
        f"tb = ({nbytes}) / ({memory_rate})",
        "total += tf if tf > tb else tb",
    ]


def comm_expected_s(
    link_bytes: float, collectives: float, m: Machine, eff: EfficiencyProfile
) -> float:
    """Expected time of a collective: its link bytes at the profile's link efficiency, plus one
    latency per collective."""
    bandwidth = m.link_bandwidth * eff.comm_bw_eff
    return transfer_time_s(link_bytes, bandwidth, eff.comm_latency_s, collectives)


def op_expected_s(op: OpCost, m: Machine, eff: EfficiencyProfile) -> tuple[float, str]:
    """Expected time of an op with the profile's achieved-efficiency factors."""
    if op.kind == COMM:
        return comm_expected_s(op.link_bytes, op.collectives, m, eff), LINK
    c_eff, b_eff = efficiencies(op.kind, eff, m.gemm_peak_dtype(op)[1], op.m_tokens)
    return expected_s(op.flops, op.bytes, _peak(op, m), m.bandwidth, c_eff, b_eff)


def time_op(op: OpCost, m: Machine, eff: EfficiencyProfile) -> OpTime:
    floor, _ = op_floor_s(op, m)
    expected, bound = op_expected_s(op, m, eff)
    return OpTime(op, floor, expected, bound)
