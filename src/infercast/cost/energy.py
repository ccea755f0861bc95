"""Energy of a step: board power as a function of the step's tensor activity, per GPU.

The model follows the energy roofline of Choi, Bedard, Fowler and Vuduc ("A roofline
model of energy", IPDPS 2013): a constant power while the kernel runs plus a power that
grows with the arithmetic units' activity. A GPU running a step of time t draws

    P_busy = P_memory + (P_compute - P_memory) * a,   a = (seconds the matmul units are busy) / t

capped at the board's TDP, so the step costs P_busy * t; an idle GPU draws P_idle.
*Activity, not FLOP/s over peak* (``tensor_activity``): as in Hong and Kim's GPU power
model ("An integrated GPU power and performance model", ISCA 2010: runtime power =
idle power + each unit's access rate x its maximum power), a unit's power follows the
fraction of time it is engaged. A GEMM or attention op keeps the tensor units engaged for
its FLOPs at the throughput it achieves (the profile's batch-dependent efficiency, e.g.
``gemm_eff`` at m rows), capped at the op's time, so a batch-128 decode GEMM running at
a third of peak engages them three times longer than W / peak says.
P_memory is the measured board power of a busy memory-bound step (batch-1 decode:
HBM streaming, tensor cores nearly idle), P_compute the power at full tensor
throughput (the TDP). The three powers per part are cited in ``data/power.csv``
(``data/POWER.md``).

*Why the memory-bound power is the floor of a busy GPU, not P_idle plus bandwidth
use:* a decoding GPU keeps its clocks up and every SM waiting on HBM; the published
batch-1 figure (267 W on an H100 SXM) already is that state, so scaling it down by a
bandwidth fraction would undercount. *Known gap:* published high-batch decode draws
approach TDP (680 W at batch 128 on an H100) at tensor utilizations this model puts
near 20%: energy per token at large batch is under-predicted (``docs/energy.md``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache

from infercast.cost.ops import ATTENTION, GEMM
from infercast.cost.step import StepCost, StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import data_path
from infercast.specs.hardware import HardwareSpec

# Fractions of TDP used for a part without a power.csv row: the H100 SXM row (80.3 / 700, 267 /
# 700).
DEFAULT_IDLE_FRACTION = 80.3 / 700.0
DEFAULT_MEMORY_FRACTION = 267.0 / 700.0
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class PowerModel:
    """Board power of one GPU (watts) at idle, memory-bound and compute-bound load."""

    hardware: str
    idle_w: float
    memory_bound_w: float
    compute_bound_w: float
    max_w: float  # the cap: the board's TDP
    source: str  # "power.csv" or the assumption used

    def busy_power_w(self, u_compute: float) -> float:
        """Board power of a GPU running a step at tensor utilization ``u_compute`` (0-1)."""
        u = min(max(u_compute, 0.0), 1.0)
        return min(
            self.memory_bound_w + (self.compute_bound_w - self.memory_bound_w) * u, self.max_w
        )

    def energy_j(self, time_s: float, flops: float, peak_flops: float) -> float:
        """Joules of one GPU running ``flops`` in ``time_s`` at ``peak_flops`` (module
        docstring)."""
        if time_s <= 0:
            return 0.0
        u_c = flops / (peak_flops * time_s) if peak_flops > 0 else 0.0
        return self.busy_power_w(u_c) * time_s


@cache
def _power_rows() -> dict[str, dict[str, str]]:
    with data_path("power.csv").open(newline="") as fh:
        return {row["hardware"]: row for row in csv.DictReader(fh)}


def power_model(hw: HardwareSpec) -> PowerModel:
    """The power model of a part: its ``power.csv`` row, else TDP fractions of the H100 row.

    Raises ConfigError when the part has neither a row nor a TDP (no energy figure is
    better than an invented one)."""
    row = _power_rows().get(hw.key)
    if row is not None:
        idle, mem, comp = (
            float(row["idle_w"]),
            float(row["memory_bound_w"]),
            float(row["compute_bound_w"]),
        )
        return PowerModel(hw.key, idle, mem, comp, max(comp, hw.tdp_w or comp), "power.csv")
    tdp = hw.tdp_w
    if (
        not tdp or not math.isfinite(tdp) or tdp <= 0 or tdp > 5000
    ):  # > 5 kW per GPU: not a board power
        raise ConfigError(
            f"hardware {hw.key!r} has no TDP (tdp_w) and no row in power.csv: "
            f"add tdp_w to its spec to get energy figures"
        )
    return PowerModel(
        hw.key,
        DEFAULT_IDLE_FRACTION * tdp,
        DEFAULT_MEMORY_FRACTION * tdp,
        tdp,
        tdp,
        f"assumed: the H100 SXM's idle and memory-bound fractions of {hw.key}'s {tdp:g} W TDP",
    )


def try_power_model(hw: HardwareSpec) -> PowerModel | None:
    """``power_model`` or None when the part has no power figures."""
    try:
        return power_model(hw)
    except ConfigError:
        return None


def tensor_busy_s(sm: StepModel, cost: StepCost) -> float:
    """Seconds of a step during which the matmul units are engaged: each GEMM's and attention
    op's FLOPs at the throughput the profile says it achieves, at most the op's time."""
    m, eff = sm.machine, sm.profile
    busy = 0.0
    for o in cost.ops:
        if o.op.kind == GEMM:
            peak, dtype = m.gemm_peak_dtype(o.op)
            rate = peak * eff.gemm_eff(dtype, max(o.op.m_tokens, 1e-9))
        elif o.op.kind == ATTENTION:
            rate = m.attn_peak_flops * eff.attn_compute_eff
        else:
            continue
        if rate > 0:
            busy += min(o.time_s, o.op.flops / rate)
    return busy


def tensor_activity(sm: StepModel, cost: StepCost, time_s: float | None = None) -> float:
    """Fraction (0-1) of a step of ``time_s`` (default: its expected time) with the matmul
    units engaged (module docstring)."""
    t = cost.time_s if time_s is None else time_s
    return min(1.0, tensor_busy_s(sm, cost) / t) if t > 0 else 0.0


def step_energy_j(
    sm: StepModel, cost: StepCost, power: PowerModel, time_s: float | None = None
) -> float:
    """Joules of one step of a replica (all its GPUs) over its expected time (or ``time_s``),
    at the power of its tensor activity."""
    t = cost.time_s if time_s is None else time_s
    return power.busy_power_w(tensor_activity(sm, cost, t)) * t * sm.parallel.gpus_per_replica


def step_power_w(sm: StepModel, cost: StepCost, power: PowerModel) -> float:
    """Average power of a replica (all its GPUs) during one step, watts."""
    t = cost.time_s
    return (
        step_energy_j(sm, cost, power) / t if t > 0 else power.idle_w * sm.parallel.gpus_per_replica
    )


@dataclass(frozen=True)
class TokenEnergy:
    """Dynamic (above idle) joules per prompt token and per output token of a replica, and its
    idle watts: a run's energy is idle W x wall time + these x the tokens (see ``run_energy_j``)."""

    prefill_dynamic_j_per_token: float
    decode_dynamic_j_per_token: float
    idle_w: float  # the replica's idle power (all GPUs)
    busy_w_decode: float  # the replica's average power during a representative decode step


def token_energy(
    sm: StepModel, power: PowerModel, prompt_tokens: int, decode_batch: int, decode_context: int
) -> TokenEnergy:
    """Per-token dynamic energy at a prefill of ``prompt_tokens`` and a decode step of
    ``decode_batch`` sequences at ``decode_context`` tokens (a run's means)."""
    n = sm.parallel.gpus_per_replica
    idle = power.idle_w * n
    pre = sm.prefill_cost(max(1, prompt_tokens))
    dec = sm.decode_cost(max(1, decode_batch), max(1, decode_context))
    pre_dyn = step_energy_j(sm, pre, power) - idle * pre.time_s
    dec_dyn = step_energy_j(sm, dec, power) - idle * dec.time_s
    return TokenEnergy(
        pre_dyn / max(1, prompt_tokens),
        dec_dyn / max(1, decode_batch),
        idle,
        step_power_w(sm, dec, power),
    )


def run_energy_j(
    te: TokenEnergy, replica_seconds: float, input_tokens: float, output_tokens: float
) -> float:
    """Energy of a run: every replica's idle power over its powered time plus the dynamic energy
    of the tokens it processed (prefill per prompt token, decode per output token)."""
    return (
        te.idle_w * replica_seconds
        + te.prefill_dynamic_j_per_token * input_tokens
        + te.decode_dynamic_j_per_token * output_tokens
    )


def energy_summary(
    joules: float, seconds: float, input_tokens: float, output_tokens: float, requests: float
) -> dict[str, float | None]:
    """The energy keys every command reports, from a total (J) over ``seconds``."""

    def per(x: float) -> float | None:
        return joules / x if x > 0 else None

    return {
        "energy_j": joules,
        "energy_kwh": joules / J_PER_KWH,
        "average_power_w": joules / seconds if seconds > 0 else None,
        "joules_per_output_token": per(output_tokens),
        "joules_per_request": per(requests),
        "kwh_per_million_output_tokens": (joules / output_tokens * 1e6 / J_PER_KWH)
        if output_tokens > 0
        else None,
        "joules_per_token_all": per(input_tokens + output_tokens),
    }


def step_energy_dict(
    sm: StepModel, cost: StepCost, power: PowerModel, tokens: int, time_s: float | None = None
) -> dict[str, float]:
    """Energy keys of one step that produces ``tokens`` tokens (decode: its batch; prefill: its
    prompt tokens): joules per token, average watts, kWh per million tokens."""
    t = cost.time_s if time_s is None else time_s
    e = step_energy_j(sm, cost, power, t)
    per = e / tokens if tokens > 0 else math.nan
    return {
        "joules_per_token": per,
        "average_power_w": e / t if t > 0 else math.nan,
        "kwh_per_million_tokens": per * 1e6 / J_PER_KWH,
    }


def power_dict(power: PowerModel | None, num_gpus: int) -> dict[str, object] | None:
    """The power model as JSON (per GPU), or None when the part has no figures."""
    if power is None:
        return None
    return {
        "idle_w_per_gpu": power.idle_w,
        "memory_bound_w_per_gpu": power.memory_bound_w,
        "compute_bound_w_per_gpu": power.compute_bound_w,
        "max_w_per_gpu": power.max_w,
        "num_gpus": num_gpus,
        "idle_w_replica": power.idle_w * num_gpus,
        "source": power.source,
    }
