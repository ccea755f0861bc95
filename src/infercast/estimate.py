"""``estimate()``: the roofline analysis behind ``infercast estimate``, as plain objects.

One call builds the specs, one :class:`~infercast.cost.step.StepModel`, and
evaluates prefill for a prompt and decode across batch sizes at a context,
with the memory plan and $/M tokens. ``Estimate.to_dict()`` is the JSON the CLI
prints (its keys are a contract other tools rely on; see docs/estimate.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from infercast.cost.dollars import dollars_per_million_tokens
from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.energy import PowerModel, power_dict, step_energy_dict, try_power_model
from infercast.cost.experts import ExpertPrecision, resolve_precision
from infercast.cost.memory import DEFAULT_MEMORY_FRACTION, fit_suggestions
from infercast.cost.step import StepCost, StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

SEED = {
    "model": "llama-3.1-70b",
    "hardware": "h100-sxm",
    "weights": "fp8",
    "kv_cache": "fp8",
    "batches": (1, 8, 32, 64),
    "context": 2048,
    "prompt": 1024,
}


@dataclass(frozen=True)
class DecodePoint:
    """Decode at one batch size: step time, throughput, bound, memory fit and cost."""

    batch: int
    context: int
    cost: StepCost
    fits: bool
    required_bytes: float
    seed_formula_time_s: (
        float  # (params*w + kv/token*context*batch)/bandwidth, the seed's estimator
    )
    price_per_hour: float | None
    num_gpus: int
    use_floor: bool = False
    energy: dict[str, float] | None = None  # step_energy_dict: J per output token, watts, kWh/M

    @property
    def step_time_s(self) -> float:
        return self.cost.time_s

    @property
    def floor_step_time_s(self) -> float:
        return self.cost.floor_time_s

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second of the replica (all users)."""
        t = self.floor_step_time_s if self.use_floor else self.step_time_s
        return self.batch / t

    @property
    def tokens_per_s_per_user(self) -> float:
        return self.tokens_per_s / self.batch

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return dollars_per_million_tokens(self.price_per_hour, self.num_gpus, self.tokens_per_s)

    def to_dict(self) -> dict[str, Any]:
        c = self.cost
        return {
            "batch": self.batch,
            "context": self.context,
            "step_time_s": c.time_s,
            "floor_step_time_s": c.floor_time_s,
            "overlap_floor_step_time_s": c.overlap_floor_s,
            "seed_formula_time_s": self.seed_formula_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "bound": c.bound,
            "fits": self.fits,
            "required_bytes": self.required_bytes,
            "flops": c.flops,
            "bytes": c.bytes,
            "arithmetic_intensity": c.intensity,
            "cost_per_million_output_tokens": self.cost_per_million_output_tokens,
            "joules_per_output_token": self.energy["joules_per_token"] if self.energy else None,
            "average_power_w": self.energy["average_power_w"] if self.energy else None,
            "kwh_per_million_output_tokens": self.energy["kwh_per_million_tokens"]
            if self.energy
            else None,
        }


@dataclass(frozen=True)
class Estimate:
    """Everything ``infercast estimate`` reports, for one configuration."""

    model: ModelSpec
    hardware: HardwareSpec
    precision: Precision
    parallel: Parallelism
    profile: EfficiencyProfile
    step_model: StepModel
    prompt_tokens: int
    context: int  # the longest decode context asked for
    prefill: StepCost
    decode: tuple[DecodePoint, ...]
    price_per_hour: float | None
    use_floor: bool = False
    notes: tuple[str, ...] = field(default=())
    power: PowerModel | None = None  # None: the part has no TDP nor power.csv row

    @property
    def num_gpus(self) -> int:
        return self.parallel.gpus_per_replica

    @property
    def ttft_s(self) -> float:
        """Unloaded time to first token: the prefill step of the prompt."""
        return self.prefill.floor_time_s if self.use_floor else self.prefill.time_s

    @property
    def cost_per_million_input_tokens(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return self.price_per_hour * self.num_gpus / 3600.0 * self.ttft_s / self.prompt_tokens * 1e6

    def to_dict(self) -> dict[str, Any]:
        m, h, mem = self.model, self.hardware, self.step_model.memory
        biggest = max((d for d in self.decode if d.context == self.context), key=lambda d: d.batch)
        p = self.prefill
        return {
            "mode": "floor" if self.use_floor else "expected",
            "model": {
                "name": m.name,
                "arch": m.arch,
                "total_params": m.total_params,
                "active_params": m.active_params,
                "num_layers": m.num_layers,
                "kv_bytes_per_token": m.kv_bytes_per_token(self.precision.kv_bytes),
                "notes": list(m.notes),
            },
            "hardware": {
                "key": h.key,
                "name": h.name,
                "memory_bytes": h.memory_bytes,
                "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
                "peak_flops_per_s": dict(h.flops_per_s),
                "link_bandwidth_bytes_per_s": h.link_bandwidth_bytes_per_s,
            },
            "precision": {
                "weights": self.precision.weights,
                "compute": self.step_model.precision.compute,
                "kv_cache": self.precision.kv_cache,
                "experts": self.step_model.experts.label if self.step_model.experts else None,
            },
            "parallel": {
                "tp": self.parallel.tp,
                "pp": self.parallel.pp,
                "ep": self.parallel.ep,
                "num_gpus": self.num_gpus,
            },
            "profile": self.profile.to_dict(),
            "memory": {
                "fits": all(d.fits for d in self.decode),
                "batch": biggest.batch,
                "context": self.context,
                "required_bytes": biggest.required_bytes,
                "available_bytes": mem.available_bytes,
                "device_bytes": mem.device_bytes,
                "weight_bytes": mem.weight_bytes,
                "activation_bytes": mem.activation_bytes,
                "kv_bytes": mem.kv_bytes(biggest.batch, self.context),
                "kv_budget_bytes": mem.kv_budget_bytes,
                "kv_capacity_tokens": mem.kv_capacity_tokens,
                "max_batch": mem.max_batch(self.context),
                "suggestions": []
                if biggest.fits
                else fit_suggestions(
                    mem, biggest.batch, self.context, self.parallel, self.precision
                ),
                "units": "bytes (GB = 1e9, GiB = 2**30)",
            },
            "prefill": {
                "prompt_tokens": self.prompt_tokens,
                "time_s": p.time_s,
                "floor_time_s": p.floor_time_s,
                "ttft_s": self.ttft_s,
                "bound": p.bound,
                "flops": p.flops,
                "bytes": p.bytes,
                "arithmetic_intensity": p.intensity,
                "tokens_per_s": self.prompt_tokens
                / (p.floor_time_s if self.use_floor else p.time_s),
            },
            "decode": [d.to_dict() for d in self.decode],
            "energy": self._energy_dict(),
            "cost": {
                "price_per_hour": self.price_per_hour,
                "price_source": h.price_source,
                "num_gpus": self.num_gpus,
                "per_million_input_tokens": self.cost_per_million_input_tokens,
            },
            "notes": list(self.notes),
        }

    def _energy_dict(self) -> dict[str, Any] | None:
        """The power model and the prefill's joules per prompt token (decode rows carry their
        own)."""
        if self.power is None:
            return None
        p = self.prefill
        pre = step_energy_dict(
            self.step_model,
            p,
            self.power,
            self.prompt_tokens,
            p.floor_time_s if self.use_floor else p.time_s,
        )
        return {
            "power": power_dict(self.power, self.num_gpus),
            "prefill_joules_per_input_token": pre["joules_per_token"],
            "prefill_average_power_w": pre["average_power_w"],
            "model": "cost/energy.py (energy roofline: busy power + per-FLOP energy, TDP cap)",
        }


def _seed_formula_s(
    model: ModelSpec,
    prec: Precision,
    hw: HardwareSpec,
    par: Parallelism,
    batch: int,
    context: int,
    expert_weight_bytes: float | None = None,
) -> float:
    """The seed's estimator: (params * bytes/param + kv/token * context * batch) / bandwidth, per
    GPU (routed experts at their own bytes/param when the checkpoint stores them apart)."""
    weights = model.total_params * prec.weight_bytes
    if expert_weight_bytes is not None and model.moe is not None:
        weights += (
            model.num_moe_layers
            * model.moe.num_experts
            * model.expert_params
            * (expert_weight_bytes - prec.weight_bytes)
        )
    weights /= par.gpus_per_replica
    kv = model.kv_bytes_per_token(prec.kv_bytes) * context * batch / par.gpus_per_replica
    return (weights + kv) / hw.memory_bandwidth_bytes_per_s


def _check_positive(name: str, values: Sequence[int]) -> None:
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ConfigError(f"`{name}` must be positive integers, got {v!r}")


@dataclass(frozen=True)
class EstimateRequest:
    """What :func:`estimate` is asked: a model on a part, at a precision and layout, and the
    prompt, contexts and batch sizes to report.

    ``context`` may be a list: decode rows cover every (context, batch) pair and
    the memory verdict uses the longest context. ``weights="checkpoint"`` serves the
    model as its checkpoint ships (:mod:`infercast.specs.checkpoint`: FP8 for
    DeepSeek-V3, MXFP4 experts beside BF16 for gpt-oss). ``experts`` sets the routed
    experts' own precision (``"mxfp4/bf16"``, ``"mxfp4/fp8"``, or ``"none"`` for the
    weights' dtype); None keeps what ``weights`` implies. ``profile`` None: the code's
    built-in efficiency profile; ``price_per_hour`` None: the part's median quote;
    ``add_max_batch``: also report the largest batch that fits. ``head_weights``: the LM
    head's own storage dtype (``Precision.head_weights``; None: the weights').
    """

    model: str | ModelSpec = SEED["model"]
    hardware: str | HardwareSpec = SEED["hardware"]
    weights: str = "checkpoint"
    kv_cache: str | None = None
    compute: str | None = None
    batches: Sequence[int] = (1, 8, 32, 64)
    context: int | Sequence[int] = 2048
    prompt: int = 1024
    parallel: Parallelism | None = None
    profile: EfficiencyProfile | None = None
    price_per_hour: float | None = None
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    use_floor: bool = False
    add_max_batch: bool = False
    experts: str | None = None
    head_weights: str | None = None


def estimate(*args: Any, **kwargs: Any) -> Estimate:
    """Roofline estimate of prefill and decode (module docstring) for an :class:`EstimateRequest`.

    ``estimate(request)``; ``estimate(request, batches=[1])`` (the request with those fields
    changed); or the request's fields themselves, by name or in their order
    (``estimate("llama-3.1-8b", "h100-sxm", weights="fp8")``).
    """
    if args and isinstance(args[0], EstimateRequest):
        if len(args) > 1:
            raise TypeError("estimate(request, ...) takes the request's fields by name only")
        return _estimate(replace(args[0], **kwargs))
    return _estimate(EstimateRequest(*args, **kwargs))


def _estimate(r: EstimateRequest) -> Estimate:
    model, hardware, weights, context, batches, prompt = (
        r.model,
        r.hardware,
        r.weights,
        r.context,
        r.batches,
        r.prompt,
    )
    memory_fraction, price_per_hour, parallel, use_floor = (
        r.memory_fraction,
        r.price_per_hour,
        r.parallel,
        r.use_floor,
    )
    contexts = sorted(set([context] if isinstance(context, int) else list(context)))
    _check_positive("batches", list(batches))
    _check_positive("context", contexts)
    _check_positive("prompt", [prompt])
    if not 0 < memory_fraction <= 1:
        raise ConfigError(f"`memory_fraction` must be in (0, 1], got {memory_fraction}")
    m = load_model(model) if isinstance(model, str) else model
    h = load_hardware(hardware) if isinstance(hardware, str) else hardware
    if price_per_hour is not None:
        if price_per_hour < 0:
            raise ConfigError(f"`price_per_hour` must be >= 0 $/GPU-hour, got {price_per_hour}")
        h = h.with_price(price_per_hour, "--price")
    name = model if isinstance(model, str) else m.name
    weights, expert_spec, origin = resolve_precision(name, h, weights, r.experts)
    prec = Precision.parse(weights, r.kv_cache, r.compute, r.head_weights)
    par = parallel or Parallelism()
    sm = StepModel(
        m,
        h,
        prec,
        par,
        r.profile,
        memory_fraction=memory_fraction,
        experts=ExpertPrecision.parse(expert_spec) if expert_spec else None,
    )
    mem = sm.memory
    context = contexts[-1]
    power = try_power_model(h)
    decode = []
    for ctx in contexts:
        batch_list = sorted(set(batches))
        mb = mem.max_batch(ctx)
        if r.add_max_batch and mb > 0 and mb not in batch_list:
            batch_list = sorted(set(batch_list + [mb]))
        decode += [
            DecodePoint(
                b,
                ctx,
                sm.decode_cost(b, ctx),
                mem.fits(b, ctx),
                mem.required_bytes(b, ctx),
                _seed_formula_s(
                    m, prec, h, par, b, ctx, sm.experts.weight_bytes if sm.experts else None
                ),
                h.price_per_hour,
                par.gpus_per_replica,
                use_floor,
                _decode_energy(sm, power, b, ctx, use_floor),
            )
            for b in batch_list
        ]
    notes = list(m.notes) + list(sm.notes) + ([origin] if origin else [])
    if context > m.max_context > 0:
        notes.append(
            f"context {context} exceeds the model's max_position_embeddings {m.max_context}"
        )
    if not mem.weights_fit:
        notes.append(f"weights do not fit: {mem.shortfall_message(1, context)}")
    return Estimate(
        m,
        h,
        prec,
        par,
        sm.profile,
        sm,
        prompt,
        context,
        sm.prefill_cost(prompt),
        tuple(decode),
        h.price_per_hour,
        use_floor,
        tuple(notes),
        power,
    )


def _decode_energy(
    sm: StepModel, power: PowerModel | None, batch: int, context: int, use_floor: bool
) -> dict[str, float] | None:
    if power is None:
        return None
    cost = sm.decode_cost(batch, context)
    return step_energy_dict(sm, cost, power, batch, cost.floor_time_s if use_floor else cost.time_s)
