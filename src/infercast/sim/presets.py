"""A simulator config under an engine preset and an efficiency profile.

What ``infercast simulate`` and ``infercast bench --compare`` both do before a run: put the
``--engine`` preset's scheduler under the config (:func:`with_engine`) and build one
replica's cost model timed with the ``--profile`` (:func:`build_step_model`).
"""

from __future__ import annotations

from infercast.cost.profiles import resolve_profile
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
