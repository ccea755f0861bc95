"""Cost models for a validated :class:`~infercast.sim.config.SimConfig`.

``step_model(cfg)`` is the target model of one replica; ``spec_timer(cfg, target)``
wraps it for speculative decoding; ``pool_step_model(cfg, pool, target)`` gives a
disaggregated pool's model (the target itself when the pool changes nothing).
"""

from __future__ import annotations

from infercast.errors import DoesNotFitError


def engine_defaults(preset, data: dict) -> dict:
    """The scheduler settings an engine preset (:mod:`infercast.specs.engines`) gives a run config
    ``data`` (a nested dict), resolved on its part and TP size; merged *under* the file and
    flags."""
    from infercast.sim.config import SimConfig
    from infercast.specs.catalog import load_hardware

    hw = load_hardware(str(data.get("hardware") or SimConfig.model_fields["hardware"].default))
    p = preset.for_hardware(hw.key, hw.memory_bytes, int(data.get("tp") or 1))
    return {
        "scheduler": {
            "policy": p.policy,
            "max_num_seqs": p.max_num_seqs,
            "max_num_batched_tokens": p.max_num_batched_tokens,
            "block_size": p.block_size,
            "admission": p.admission,
            **p.admission_params,
            **({"max_prefill_tokens": p.max_prefill_tokens} if p.max_prefill_tokens else {}),
        }
    }


def engine_memory_fraction(preset, sm) -> float:
    """The fraction of device memory ``preset``'s memory rule gives the replica of StepModel ``sm``
    (its weights and activation reserve as ``sm`` plans them)."""
    p = preset.for_hardware(
        sm.hardware.key, sm.hardware.memory_bytes, sm.parallel.tp * sm.parallel.pp
    )
    mem = sm.memory
    return p.memory_fraction_for(mem.weight_bytes, mem.activation_bytes, mem.device_bytes)


def step_model(
    cfg,
    hardware=None,
    tp: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    ep: int | None = None,
    attn_dp: bool | None = None,
    profile=None,
    memory_fraction: float | None = None,
    engine=None,
):
    """The cost model of one replica (``cfg``'s settings, with optional overrides).

    ``hardware``: a preset key, spec file or a loaded ``HardwareSpec`` (default ``cfg.hardware``);
    ``profile``: the :class:`~infercast.cost.efficiency.EfficiencyProfile` that times the steps
    (default: the code's built-in one); ``memory_fraction``: of device memory the engine may use
    (default: ``engine``'s memory rule when an :class:`~infercast.specs.engines.EnginePreset` is
    given, else the cost model's default).
    """
    if engine is not None and memory_fraction is None:
        probe = step_model(
            cfg, hardware, tp, max_num_seqs, max_num_batched_tokens, ep, attn_dp, profile, 1.0
        )
        memory_fraction = engine_memory_fraction(engine, probe)
    from infercast.cost.experts import ExpertPrecision
    from infercast.cost.step import DEFAULT_MEMORY_FRACTION
    from infercast.sim.levers import apply_kv_offload, lever_kwargs
    from infercast.specs.catalog import load_hardware, load_model
    from infercast.specs.precision import Precision

    hw = hardware or cfg.hardware
    spec = load_hardware(hw) if isinstance(hw, str) else hw
    model = load_model(cfg.model)
    cls, extra = lever_kwargs(cfg, model, spec)
    sm = cls(
        model,
        spec,
        Precision.parse(cfg.weights, cfg.kv_cache, cfg.compute, cfg.head_weights),
        _parallel(cfg, tp or cfg.tp, ep, attn_dp),
        profile,
        memory_fraction=memory_fraction or DEFAULT_MEMORY_FRACTION,
        max_batched_tokens=max_num_batched_tokens or cfg.scheduler.max_num_batched_tokens,
        max_seqs=max_num_seqs or cfg.scheduler.max_num_seqs,
        experts=ExpertPrecision.parse(cfg.experts) if cfg.experts else None,
        **extra,
    )
    apply_kv_offload(cfg, sm)
    if cfg.scheduler.num_blocks is None and sm.kv_capacity_tokens < cfg.scheduler.block_size:
        raise DoesNotFitError(
            f"{cfg.model} on {spec.key} (TP {tp or cfg.tp}) leaves no memory for the KV cache "
            f"({sm.kv_capacity_tokens} tokens): use more `tp`, smaller `weights`, or other hardware"
        )
    return sm


def spec_timer(cfg, target):
    """A :class:`~infercast.sim.speculative.SpecTimer` for ``cfg.speculative`` on ``target``."""
    from infercast.cost.speculative import SpeculativeConfig, SpeculativeModel
    from infercast.cost.step import StepModel
    from infercast.sim.speculative import SpecTimer
    from infercast.specs.catalog import load_model

    s = cfg.speculative
    sc = SpeculativeConfig(
        method=s.method,
        num_speculative_tokens=s.num_speculative_tokens,
        acceptance=s.acceptance,
        acceptance_std=s.acceptance_std,
        draft_layers=s.draft_layers,
        verify_tokens=s.verify_tokens,
    )
    draft = None
    if s.method == "draft":
        draft = StepModel(
            load_model(s.draft_model),
            target.hardware,
            target.precision,
            target.parallel,
            target.profile,
        )
    return SpecTimer(SpeculativeModel(target, sc, draft))


def pool_step_model(cfg, pool, target):
    """The cost model of a disaggregated pool: ``target`` unless the pool sets its own part or TP.

    A pool model of its own keeps ``target``'s efficiency profile, memory fraction and (unless
    the pool names another part) its hardware spec, so both pools are timed alike.
    """
    same = (
        pool.hardware in (None, cfg.hardware)
        and pool.tp in (None, cfg.tp)
        and pool.ep in (None, cfg.ep)
        and pool.attn_dp in (None, cfg.attn_dp)
        and pool.max_num_seqs is None
        and pool.max_num_batched_tokens is None
    )
    if same and target is not None:
        return target
    if target is None:
        return step_model(
            cfg,
            pool.hardware,
            pool.tp,
            pool.max_num_seqs,
            pool.max_num_batched_tokens,
            pool.ep,
            pool.attn_dp,
        )
    mem = (
        target.memory
    )  # available = device x fraction (cost/memory.py); 12 digits undo the rounding
    fraction = float(f"{mem.available_bytes / mem.device_bytes:.12g}")
    hw = pool.hardware if pool.hardware not in (None, cfg.hardware) else target.hardware
    return step_model(
        cfg,
        hw,
        pool.tp,
        pool.max_num_seqs,
        pool.max_num_batched_tokens,
        pool.ep,
        pool.attn_dp,
        target.profile,
        fraction,
    )


def _parallel(cfg, tp: int, ep: int | None = None, attn_dp: bool | None = None):
    """The replica's layout: ``tp`` GPUs, expert parallel up to them, attention DP if asked."""
    from infercast.specs.parallel import Parallelism

    return Parallelism(
        tp=tp, ep=min(ep or cfg.ep, tp), attn_dp=cfg.attn_dp if attn_dp is None else attn_dp
    )
