"""A simulator config under an engine preset and an efficiency profile.

What ``infercast simulate`` and ``infercast bench --compare`` both do before a run: put the
``--engine`` preset's scheduler under the config (:func:`with_engine`) and build one
replica's cost model timed with the ``--profile`` (:func:`build_step_model`), at the compute
dtype the profile was fitted at when the config names none (:func:`with_profile_compute`).
"""

from __future__ import annotations

from infercast.cost.profiles import profile_compute, profile_head_weights, resolve_profile
from infercast.sim.build import engine_defaults, step_model
from infercast.sim.config import merge
from infercast.specs.catalog import load_hardware
from infercast.specs.engines import EnginePreset, load_engine


def build_step_model(cfg, profile: str | None = None, engine: EnginePreset | str | None = None):
    """The cost model of one replica for a validated config (speculative and disaggregated runs
    wrap it).

    ``profile``: the ``--profile`` flag (``cost.profiles.resolve_profile``; None = the shipped
    calibrated profile); ``engine``: an :class:`~infercast.specs.engines.EnginePreset` (or its
    name), whose profile group times the steps and whose memory rule sizes the KV cache.
    """
    if isinstance(engine, str):
        engine = load_engine(engine)
    group = engine.profile_group if engine is not None else None
    resolved = resolve_profile(profile, load_hardware(cfg.hardware).key, group)
    return step_model(cfg, profile=resolved, engine=engine)


def with_engine(data: dict, engine: str | None) -> tuple[dict, EnginePreset | None]:
    """(config dict with the ``engine`` preset's scheduler under it, the preset or None)."""
    if engine is None:
        return data, None
    preset = load_engine(engine)
    return merge(engine_defaults(preset, data), data), preset


def with_profile_compute(data: dict, profile: str | None) -> dict:
    """The config dict with the ``profile`` file's compute dtype (``cost.profiles.
    profile_compute``) when the config names none: a profile's GEMM efficiencies are fractions
    of the peak it was fitted at (``infercast machine``: the CPU engine's float32, where an
    ``int4`` model would default to the bf16 peak), so its steps are priced at that peak. The
    same for the LM head's own storage dtype (``cost.profiles.profile_head_weights``): a
    profile fitted to a model whose head is kept apart from its layers (SmolLM2's Q8_0 head
    beside Q4_1 layers) prices that head at its own bytes."""
    out = dict(data)
    if data.get("compute") is None:
        compute = profile_compute(profile)
        if compute is not None:
            out["compute"] = compute
    if data.get("head_weights") is None:
        head = profile_head_weights(profile)
        if head is not None:
            out["head_weights"] = head
    return out
