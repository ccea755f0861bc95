"""Routed experts stored and computed in their own precision (mixed-precision MoE checkpoints).

Some MoE checkpoints quantize only the routed experts: gpt-oss ships its expert
weights in MXFP4 and keeps attention, router, embeddings and LM head in BF16
(``quantization_config.modules_to_not_convert`` of its ``config.json``). The
engine then runs two precisions in one step, and the experts' GEMMs run on a
tensor-core rate set by the *activation* format the MoE kernel uses, not by the
4-bit weights:

- MXFP4 (OCP Microscaling Formats spec v1.0): 4-bit E2M1 elements in blocks of
  32 sharing one 8-bit E8M0 scale -> 0.5 + 1/32 bytes per weight.
- Hopper has no FP4 tensor cores: TensorRT-LLM's default for MXFP4 checkpoints on
  Hopper is ``W4A16_MXFP4`` (weights upcast, BF16 MMA); on Blackwell
  ``W4A8_MXFP4_MXFP8`` (MXFP8 activations, the block-scaled FP8 MMA: the FP8 rate)
  (TensorRT-LLM ``docs/source/blogs/tech_blog/blog9_Deploying_GPT_OSS_on_TRTLLM.md``,
  "Using the MXFP4 Checkpoints"; its deployment guide's MoE backend matrix lists
  H200: BF16 activations x MXFP4 weights, TRITON backend).
"""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import ConfigError
from infercast.specs.checkpoint import checkpoint_weights, served_precision, unknown_quantization
from infercast.specs.hardware import HardwareSpec
from infercast.specs.precision import normalize_dtype

MXFP4_BYTES_PER_WEIGHT = 0.5 + 1.0 / 32  # E2M1 nibble + one E8M0 byte per 32-element block
FORMAT_BYTES = {"mxfp4": MXFP4_BYTES_PER_WEIGHT}


@dataclass(frozen=True, slots=True)
class ExpertPrecision:
    """Storage bytes per routed-expert weight (scales included) and the dtype their GEMMs run in."""

    weight_bytes: float
    compute: str  # the tensor-core rate of the experts' GEMMs: "bf16" (W4A16), "fp8" (W4A8)
    label: str = ""
    spec: str = ""  # the "<format>/<compute>" it was parsed from

    def __post_init__(self) -> None:
        if not self.weight_bytes > 0:
            raise ConfigError(f"expert weight bytes {self.weight_bytes!r} must be > 0")
        object.__setattr__(self, "compute", normalize_dtype(self.compute, "expert compute dtype"))

    @classmethod
    def parse(cls, spec: str) -> ExpertPrecision:
        """``"<format>/<compute>"``, e.g. ``"mxfp4/bf16"`` (W4A16) or ``"mxfp4/fp8"`` (W4A8)."""
        fmt, _, compute = spec.strip().lower().partition("/")
        if fmt not in FORMAT_BYTES or not compute:
            raise ConfigError(
                f"expert precision {spec!r}: use <format>/<compute dtype> with format one of "
                f"{', '.join(FORMAT_BYTES)}, e.g. mxfp4/bf16"
            )
        return cls(
            FORMAT_BYTES[fmt], compute, f"{fmt} experts, {compute} compute", f"{fmt}/{compute}"
        )


def resolve_precision(
    model: str, hardware: HardwareSpec, weights: str, experts: str | None
) -> tuple[str, str | None, str]:
    """(weights dtype, experts spec or None, a note on where they come from) for a run.

    ``weights="checkpoint"`` serves the model as published (:func:`served_precision`); a
    stated dtype quantizes the whole model uniformly. ``experts`` (``"<format>/<compute>"``,
    or ``"none"``) overrides the experts either way; None keeps what ``weights`` implies.
    """
    note, expert_spec = "", None
    if weights.strip().lower() == "checkpoint":
        weights, expert_spec = served_precision(model, hardware)
        note = f"weights as the checkpoint ships them: {weights}" + (
            f", routed experts {expert_spec.replace('/', ' with ')} compute" if expert_spec else ""
        )
        unknown = unknown_quantization(model)
        if unknown:
            raise ConfigError(
                f"{model}: its quantization_config (quant_method {unknown!r}) is not one infercast "
                "reads: pass `weights` (e.g. int4, fp8)"
            )
        if checkpoint_weights(model) is None and not expert_spec:
            note = "weights: the checkpoint's config names no dtype, bf16 assumed (pass --weights)"
    if experts is not None:
        expert_spec = None if experts.strip().lower() == "none" else experts
        if expert_spec:
            ExpertPrecision.parse(expert_spec)  # a bad spec fails here, naming the value
    return weights, expert_spec, note
