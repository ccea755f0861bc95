"""Serving-engine presets: an engine's scheduling and memory defaults as data, each value cited.

A preset is one TOML file (``data/engines/<name>.toml``, or a file a user writes) whose fields
are those of :class:`EnginePreset`; its ``[sources]`` table cites, per field, the engine's
source file or documentation (and version) that sets the value. A preset may refine its
values per GPU (``[[by_gpu]]``: the first entry whose memory bound or key prefix matches the
part wins; vLLM's smaller defaults below 70 GiB and on A100, SGLang's chunk size by memory)
and per TP size (``[memory_fraction_by_tp]``: SGLang's ``mem_fraction_static``).

What the simulator applies (``sim.build``, ``commands/simulate.py``): ``policy``,
``max_num_seqs``, ``max_num_batched_tokens``, ``max_prefill_tokens``, ``block_size``, the memory
rule and fraction,
``admission`` with its parameters (``sched/admission.py``) and ``profile_group`` (the
calibrated efficiency group it is timed with). Recorded for the reader, not modelled:
``chunked_prefill`` / ``chunk_size`` beyond the token budget (an engine that runs whole prompts
is simulated with chunks), ``admission_watermark``, ``preemption = "reserve"`` unless
``admission = "reserve-full-output"`` (which never preempts) and ``stream_interval`` (every
preset streams each step's tokens). ``EnginePreset.unmodelled`` lists them per preset.

``--engine NAME`` takes a preset name (``vllm-0.12``), an engine family (``vllm``, ``sglang``,
``trtllm``, ``trtllm-engine``: that family's newest preset) or a path to a preset TOML.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from infercast.errors import ConfigError
from infercast.specs.catalog import data_path, read_toml

PROFILE_GROUPS = (
    "vllm",
    "sglang",
    "trtllm",
    "trtllm-engine",
)  # cost.profiles engine families with presets
GiB = 2**30
RATIO_PARAMS = (
    "new_token_ratio_init",
    "new_token_ratio_min_factor",
    "new_token_ratio_decay_steps",
    "clip_max_new_tokens",
    "retract_decode_steps",
)  # the ``sglang-new-token-ratio`` admission rule's parameters (sched/admission.py)
SGLANG_RULES = ("sglang-new-token-ratio", "sglang-ignore-eos")  # the rules that take them


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuRule(_Frozen):
    """Values that replace the preset's on parts below a memory size, or whose key starts with a
    prefix."""

    below_memory_gib: float = Field(gt=0)
    also_keys: tuple[str, ...] = ()
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    chunk_size: int | None = Field(default=None, ge=0)

    def matches(self, hardware_key: str, memory_bytes: float) -> bool:
        return memory_bytes < self.below_memory_gib * GiB or hardware_key.lower().startswith(
            self.also_keys
        )


class AdmissionFields(BaseModel):
    """When a waiting request may start (sched/admission.py): by the KV free now (vLLM), with KV
    for its whole sequence reserved (TensorRT-LLM GUARANTEED_NO_EVICT), against SGLang's
    new_token_ratio estimate of the running requests' remaining output, or by SGLang's rule for
    ``ignore_eos`` requests without a radix cache (every running output reserved in full, checked
    in the order the requests finish); and the SGLang rules' parameters (cited in a preset's
    [sources] when one of them is chosen). One declaration for the
    engine presets and the simulator's ``[scheduler]`` section, which both inherit it."""

    admission: Literal[
        "current-use", "reserve-full-output", "sglang-new-token-ratio", "sglang-ignore-eos"
    ] = "current-use"
    new_token_ratio_init: float = Field(default=0.7, gt=0, le=1)
    new_token_ratio_min_factor: float = Field(default=0.14, ge=0, le=1)
    new_token_ratio_decay_steps: float = Field(default=600.0, gt=0)
    clip_max_new_tokens: int = Field(default=4096, ge=1)
    retract_decode_steps: int = Field(default=20, ge=0)


class EnginePreset(_Frozen, AdmissionFields):
    """One engine version's defaults (module docstring); every field but ``by_gpu`` and
    ``memory_fraction_by_tp`` must be cited in ``sources``."""

    name: str = Field(min_length=1)
    engine: Literal["vllm", "sglang", "trtllm"]
    version: str = Field(min_length=1)
    description: str = Field(min_length=1)
    profile_group: Literal["vllm", "sglang", "trtllm", "trtllm-engine"]
    # what one step holds: chunked = decodes first, then prefill chunks in the budget (vLLM V1);
    # continuous = prefill-only steps of whole prompts first (vLLM V0); prefill-first = prefill
    # batches (chunked) whenever one can be formed, else decodes (SGLang): sched/policies.py
    policy: Literal["chunked", "continuous", "prefill-first"]
    chunked_prefill: bool
    max_num_seqs: int = Field(ge=1)  # running-request limit
    max_num_batched_tokens: int = Field(ge=1)  # new tokens one step may hold
    chunk_size: int = Field(ge=0)  # prefill chunk (tokens); 0 = whole prompts
    block_size: int = Field(ge=1)  # KV block (page) in tokens
    memory_rule: Literal[
        "total", "free"
    ]  # fraction of all memory, or of what weights/activations leave
    memory_fraction: float = Field(gt=0, le=1)
    admission_watermark: float = Field(ge=0, lt=1)  # fraction of KV blocks kept free at admission
    preemption: Literal[
        "recompute", "reserve"
    ]  # reserve: KV for the whole output held from admission
    stream_interval: int = Field(ge=1)  # tokens per streamed chunk
    # SGLang's --max-prefill-tokens: new prompts one step may start (sched/policies.py
    # ``admit_waiting``); 0 = no such cap (cited only when set)
    max_prefill_tokens: int = Field(default=0, ge=0)
    memory_fraction_by_tp: dict[int, float] = Field(default_factory=dict)
    by_gpu: tuple[GpuRule, ...] = ()
    sources: dict[str, str]

    @model_validator(mode="after")
    def _cited(self) -> EnginePreset:
        cited = {
            "name",
            "engine",
            "version",
            "description",
            "profile_group",
            "sources",
            "by_gpu",
            "memory_fraction_by_tp",
        }
        if self.admission not in SGLANG_RULES:
            cited |= set(RATIO_PARAMS)  # unused by the other rules
        if not self.max_prefill_tokens:
            cited.add("max_prefill_tokens")
        missing = [f for f in type(self).model_fields if f not in cited and not self.sources.get(f)]
        if missing:
            raise ValueError(f"every value needs its source: add {', '.join(missing)} to [sources]")
        extra = sorted(set(self.sources) - set(type(self).model_fields))
        if extra:
            raise ValueError(f"[sources] names unknown field(s) {', '.join(extra)}")
        if any(not 0 < v <= 1 for v in self.memory_fraction_by_tp.values()):
            raise ValueError("memory_fraction_by_tp values must be in (0, 1]")
        return self

    @property
    def admission_params(self) -> dict[str, float | int]:
        """The SGLang rule's parameters (``RATIO_PARAMS``) by name."""
        return {k: getattr(self, k) for k in RATIO_PARAMS}

    @property
    def unmodelled(self) -> tuple[str, ...]:
        """The preset's behaviours the simulator does not reproduce (module docstring)."""
        out = []
        if not self.chunked_prefill and self.policy != "continuous":
            out.append("whole-prompt admission (simulated with chunks)")
        if self.admission_watermark:
            out.append(f"admission watermark {self.admission_watermark:g}")
        if self.preemption == "reserve" and self.admission != "reserve-full-output":
            out.append(
                "KV reserved for the whole output at admission (simulated: preempt and recompute)"
            )
        if self.stream_interval != 1:
            out.append(f"stream interval {self.stream_interval}")
        if self.admission in SGLANG_RULES:
            # python/sglang/srt/disaggregation/decode.py DecodePreallocQueue._allocatable_tokens
            out.append(
                "a disaggregated decode server's pre-allocation admission (512 tokens reserved "
                "per request; simulated with the new_token_ratio rule)"
            )
        return tuple(out)

    def for_hardware(self, hardware_key: str, memory_bytes: float, tp: int = 1) -> EnginePreset:
        """The preset as it resolves on one part at one TP size (``by_gpu``,
        ``memory_fraction_by_tp``)."""
        updates: dict = {}
        rule = next((r for r in self.by_gpu if r.matches(hardware_key, memory_bytes)), None)
        if rule is not None:
            updates = {
                k: v
                for k in ("max_num_seqs", "max_num_batched_tokens", "chunk_size")
                if (v := getattr(rule, k)) is not None
            }
        steps = [k for k in sorted(self.memory_fraction_by_tp) if k <= tp]
        if steps:
            updates["memory_fraction"] = self.memory_fraction_by_tp[steps[-1]]
        return self.model_copy(update=updates) if updates else self

    def memory_fraction_for(
        self, weight_bytes: float, activation_bytes: float, device_bytes: float
    ) -> float:
        """The fraction of device memory the engine may use: ``memory_fraction`` of all of it
        (``total``), or the weights and activations plus that fraction of what they leave
        (``free``)."""
        if self.memory_rule == "total":
            return self.memory_fraction
        used = weight_bytes + activation_bytes
        return (used + self.memory_fraction * max(device_bytes - used, 0.0)) / device_bytes


def validated(model: type[BaseModel], data: dict, what: str, where: str):
    """``model`` validated from parsed TOML; a missing, unknown or wrong field raises one
    ConfigError line naming ``what`` (``engine preset``, ``harness preset``), ``where`` and the
    field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "preset"
        msg = err["msg"].removeprefix("Value error, ")
        got = (
            ""
            if err["type"] == "missing" or isinstance(err.get("input"), dict)
            else f" (got {err.get('input')!r})"
        )
        raise ConfigError(f"{what} {where}: {field}: {msg}{got}") from None


def parse_preset(data: dict, where: str) -> EnginePreset:
    """A validated preset from parsed TOML; a missing, unknown or wrong field raises ConfigError."""
    return validated(EnginePreset, data, "engine preset", where)


def preset_names() -> list[str]:
    """Names of the shipped presets."""
    return sorted(p.stem for p in data_path("engines").glob("*.toml"))


def _read(path: Path) -> EnginePreset:
    return parse_preset(
        read_toml(path, "engine preset", "; see infercast engines for the shipped ones"), str(path)
    )


def shipped_presets() -> list[EnginePreset]:
    """Every shipped preset, in name order."""
    return [_read(data_path("engines", f"{n}.toml")) for n in preset_names()]


def _version_key(p: EnginePreset) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in p.version.split("."))


@functools.lru_cache(
    maxsize=64
)  # presets are frozen; planners and validators ask for one many times
def load_engine(name: str) -> EnginePreset:
    """A preset by name, by engine family (its newest preset) or from a TOML file (module
    docstring)."""
    key = name.strip()
    if key.lower().endswith(".toml") or "/" in key:
        return _read(Path(key))
    names = preset_names()
    if key.lower() in names:
        return _read(data_path("engines", f"{key.lower()}.toml"))
    family = [p for p in shipped_presets() if p.profile_group == key.lower()]
    if family:
        return max(family, key=_version_key)
    raise ConfigError(
        f"unknown engine {name!r}: choose one of {', '.join(names)} "
        f"(or a family: {', '.join(PROFILE_GROUPS)}), or give a preset .toml (infercast engines)"
    )


def engine_family(engine: str) -> str:
    """trtllm | vllm | sglang | llamacpp | gpt-fast | other, from a free-text engine name."""
    e = engine.lower()
    if "tensorrt-llm" in e or "trtllm" in e:
        return "trtllm"
    if "sglang" in e:
        return "sglang"
    if "vllm" in e:
        return "vllm"
    if "llama.cpp" in e:
        return "llamacpp"
    if "gpt-fast" in e:
        return "gpt-fast"
    return "other"


def trtllm_engine_flow(engine: str) -> bool:
    """Whether a TensorRT-LLM row ran the TensorRT engine flow rather than the PyTorch backend.

    TensorRT-LLM's performance overview: "Starting with v0.19, testing was performed using
    the PyTorch backend - this workflow does not require an engine to be built"; before, a
    TensorRT engine was built per model (its own kernels, runtime and batch manager). So
    ``tensorrt-llm-X.Y`` below 0.19 and NVIDIA's MLPerf harness (TensorRT engines) are the
    engine flow; rows that say ``pytorch``, later releases, and aiconfigurator's
    ``trtllm-*`` runs (its TensorRT-LLM support starts with the PyTorch backend; some of its
    version strings are Dynamo's) are the PyTorch backend.
    """
    e = engine.lower()
    if "pytorch" in e:
        return False
    if "mlperf" in e:
        return True
    version = re.match(r"tensorrt-llm-(\d+)\.(\d+)", e)
    return version is not None and (int(version.group(1)), int(version.group(2))) < (0, 19)


def preset_name(engine: str) -> str | None:
    """The preset a free-text engine name means (a measurement row's engine column: TensorRT-LLM's
    engine flow ``trtllm-engine-0.17``, its PyTorch flow ``trtllm-1.0``, vLLM before 0.8 (V0)
    ``vllm-0.6``, later vLLM ``vllm-0.12``, SGLang ``sglang-0.5``); None = no preset."""
    family = engine_family(engine)
    if family == "trtllm":
        return "trtllm-engine-0.17" if trtllm_engine_flow(engine) else "trtllm-1.0"
    if family == "sglang":
        return "sglang-0.5"
    if family == "vllm":
        version = re.search(r"vllm-(\d+)\.(\d+)", engine.lower())
        v0 = version is not None and (int(version.group(1)), int(version.group(2))) < (0, 8)
        return "vllm-0.6" if v0 else "vllm-0.12"
    return None
