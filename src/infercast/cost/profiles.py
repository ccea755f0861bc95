"""Profile sets: one efficiency profile per hardware family and engine, with a default;
the profile every command times steps with (:func:`resolve_profile`).

File layout (TOML, written by ``infercast calibrate``)::

    [profile]                       # the default; what load_profile() reads
    name = "shipped"
    mem_bw_eff = 0.82
    ...
    [groups."hopper"]               # a hardware family, any engine
    mem_bw_eff = 0.85
    [groups."hopper/trtllm"]        # a family and an engine family
    ...
    [fit]                           # how it was fitted (informational)
    rows = 1800

A profile fitted to one engine's measured products may also name, in ``[profile]``, the
compute dtype whose peak its GEMM efficiencies are fractions of (``compute = "fp32"``:
``infercast machine`` writes it); :func:`profile_compute` reads it, and a simulation with the
profile prices its matmuls at that peak unless its config names another. Likewise
``head_weights = "int8"``: the LM head's own storage in the model the profile was fitted to
(:func:`profile_head_weights`; a Q4_1 GGUF's Q8_0 head).

A row uses the most specific group present: ``family/engine``, then
``family``, then the default. A group table may hold only some fields; the
rest come from the default. Because the default sits in ``[profile]``, the
plain :func:`infercast.cost.efficiency.load_profile` reads the same file
(it sees the default only).

The shipped set (``data/profiles/default.toml``, fitted by ``infercast calibrate`` on the
shipped measurements, scored by ``infercast validate``) is the default of every command;
``builtin`` names the code's own values (:class:`~infercast.cost.efficiency.EfficiencyProfile`).
Hardware families (by preset key prefix) and engine families (from an engine's name) live
here, below the validator and the engine presets, which both use them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infercast.cost.efficiency import FIELD_NAMES, EfficiencyProfile, profile_fields
from infercast.errors import ConfigError
from infercast.specs.catalog import data_path, read_toml
from infercast.specs.engines import engine_family  # noqa: F401 (re-exported: a group's engine half)

SHIPPED = "default.toml"
BUILTIN = "builtin"
DEFAULT_PROFILE = "shipped"  # what every command's --profile defaults to

# hardware key prefix -> family; the longest matching prefix wins
HARDWARE_FAMILIES = {
    "a100": "ampere",
    "rtx-3090": "ampere",
    "a10": "ampere",
    "h100": "hopper",
    "h200": "hopper",
    "gh200": "hopper",
    "h800": "hopper",
    "b200": "blackwell",
    "b300": "blackwell",
    "gb200": "blackwell",
    "gb300": "blackwell",
    "rtx-pro-6000": "blackwell",
    "dgx-spark": "blackwell",
    "rtx-5090": "blackwell",
    "l40s": "ada",
    "l4": "ada",
    "rtx-4090": "ada",
    "mi": "amd",
    "tpu": "tpu",
    "apple": "apple",
}
# profile-group engine families: trtllm-engine is TensorRT-LLM's TensorRT engine flow, trtllm its
# PyTorch flow
ENGINE_FAMILIES = ("trtllm", "trtllm-engine", "vllm", "sglang", "llamacpp", "gpt-fast", "other")


def hardware_family(hardware: str) -> str:
    """ampere | hopper | blackwell | ada | amd | tpu | apple | other, by key prefix."""
    best = max(
        (p for p in HARDWARE_FAMILIES if hardware.lower().startswith(p)), key=len, default=None
    )
    return HARDWARE_FAMILIES[best] if best else "other"


@dataclass(frozen=True)
class ProfileSet:
    """A default profile plus optional per-group overrides (module docstring)."""

    default: EfficiencyProfile = field(default_factory=EfficiencyProfile)
    groups: dict[str, EfficiencyProfile] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.default.name

    def for_group(self, key: str) -> EfficiencyProfile:
        """The profile of ``family/engine``: most specific group present, else the default."""
        return self.groups.get(key) or self.groups.get(key.split("/")[0]) or self.default

    def to_toml(self) -> str:
        """The file layout of the module docstring."""
        lines = [
            "# infercast efficiency profile set (infercast calibrate); see docs/validation.md",
            "",
            "[profile]",
            f'name = "{self.default.name}"',
        ]
        lines += [f"{f} = {_num(getattr(self.default, f))}" for f in FIELD_NAMES]
        for key in sorted(self.groups):
            prof = self.groups[key]
            lines += ["", f'[groups."{key}"]']
            lines += [
                f"{f} = {_num(getattr(prof, f))}"
                for f in FIELD_NAMES
                if getattr(prof, f) != getattr(self.default, f)
            ]
        if self.fit:
            lines += ["", "[fit]"] + [f"{k} = {_value(v)}" for k, v in self.fit.items()]
        return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    return repr(float(f"{x:.6g}"))


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float) and math.isfinite(v):
        return _num(v) if isinstance(v, float) else str(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_profile_set(data: dict[str, Any], where: str, stem: str = "profile") -> ProfileSet:
    """A ProfileSet from parsed TOML (a plain profile file is a set with no groups)."""
    top = data.get("profile", data)
    if not isinstance(top, dict):
        raise ConfigError(f"{where}: [profile] must be a table")
    default = EfficiencyProfile(name=str(top.get("name", stem)), **profile_fields(top, where))
    groups = {}
    for key, values in (data.get("groups") or {}).items():
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: groups.{key} must be a table of profile fields")
        groups[key] = default.with_updates(
            name=f"{default.name}:{key}", **profile_fields(values, f"{where} group {key!r}")
        )
    return ProfileSet(default, groups, dict(data.get("fit") or {}))


def load_profile_set(path: str | Path | None) -> ProfileSet:
    """A profile set file; ``None`` or ``"shipped"`` gives the shipped fitted set, ``"builtin"``
    the code defaults."""
    if path == BUILTIN:
        return ProfileSet()
    p = data_path("profiles", SHIPPED) if path in (None, DEFAULT_PROFILE) else Path(path)
    if path is None and not p.is_file():
        return ProfileSet()
    data = read_toml(p, "profile", "; pass a TOML written by infercast calibrate")
    return parse_profile_set(data, str(p), p.stem)


def _profile_dtype(path: str | None, key: str) -> str | None:
    """The dtype a profile file records under ``[profile] key``, normalized; None for the
    shipped and builtin profiles and for a file that records none."""
    if path in (None, BUILTIN, DEFAULT_PROFILE):
        return None
    from infercast.specs.precision import normalize_dtype

    p = Path(str(path))
    data = read_toml(p, "profile", "; pass a TOML written by infercast calibrate")
    top = data.get("profile", data)
    value = top.get(key) if isinstance(top, dict) else None
    if value is None:
        return None
    return normalize_dtype(str(value), f"`{key}` dtype of profile {p}")


def profile_compute(path: str | None) -> str | None:
    """The compute dtype a profile file records (``[profile] compute``), normalized; None for
    the shipped and builtin profiles and for a file that records none."""
    return _profile_dtype(path, "compute")


def profile_head_weights(path: str | None) -> str | None:
    """The LM head's storage dtype a profile file records (``[profile] head_weights``:
    ``infercast machine`` fitted it to a model whose head is kept in its own format), else
    None."""
    return _profile_dtype(path, "head_weights")


def resolve_profile(
    path: str | None, hardware_key: str, engine: str | None = None
) -> EfficiencyProfile:
    """The profile a command times steps with (its ``--profile`` / ``--engine``).

    ``path``: None or ``"shipped"`` = the fitted set in the package (the default of every
    command), ``"builtin"`` = the code's values, else a TOML file (a plain profile or a set).
    ``engine``: an engine family (:data:`ENGINE_FAMILIES`, as an engine preset names its group)
    or a free-text engine name; it picks the set's group ``<family of hardware_key>/<engine
    family>`` (most specific present, else the set's default). Without ``engine`` the set's
    default profile (fitted on every row) is used.
    """
    pset = load_profile_set(path)
    if engine is None or not pset.groups:
        return pset.default
    family = engine if engine in ENGINE_FAMILIES else engine_family(engine)
    return pset.for_group(f"{hardware_family(hardware_key)}/{family}")
