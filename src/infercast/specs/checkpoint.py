"""The precision a model's published checkpoint ships in, read from its ``config.json``.

What a user gets by serving a checkpoint as published, without quantizing it:

- weights: ``quantization_config.quant_method`` when the config has one (``fp8`` for
  DeepSeek-V3/R1), else ``torch_dtype``; FP32 checkpoints are served in FP16, as vLLM's
  ``dtype="auto"`` does.
- MXFP4 checkpoints (gpt-oss) quantize only the routed experts and keep attention,
  router, embeddings and LM head in BF16 (``quantization_config.modules_to_not_convert``):
  the rest is BF16 and the experts are MXFP4 (:mod:`infercast.cost.experts`), computed
  with FP8 activations on parts with block-scaled FP4/FP8 tensor cores (Blackwell:
  TensorRT-LLM's ``W4A8_MXFP4_MXFP8``) and in BF16 elsewhere (Hopper: ``W4A16``); the
  sources are cited in :mod:`infercast.cost.experts`.
"""

from __future__ import annotations

import json
from pathlib import Path

from infercast.specs.catalog import data_path
from infercast.specs.hardware import HardwareSpec

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16", "fp8": "fp8", "mxfp4": "fp4"}
EXPERT_FORMATS = ("mxfp4",)  # quant_method values that quantize only the routed experts


def checkpoint_config(model: str) -> dict:
    """The ``config.json`` of a preset name or a path (file or model directory); {} if unreadable."""
    path = data_path("models", f"{model.strip().lower()}.json")
    if not path.is_file():
        path = Path(model).expanduser()
        path = path / "config.json" if path.is_dir() else path
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def checkpoint_weights(model: str) -> str | None:
    """The weight dtype the checkpoint ships in (module docstring), or None if its config does not say."""
    cfg = checkpoint_config(model)
    quant = cfg.get("quantization_config") or {}
    for key in (quant.get("quant_method"), cfg.get("torch_dtype")):
        if isinstance(key, str) and key.lower() in _DTYPES:
            return _DTYPES[key.lower()]
    return None


def checkpoint_expert_format(model: str) -> str | None:
    """``"mxfp4"`` when the checkpoint quantizes only its routed experts to MXFP4, else None."""
    quant = checkpoint_config(model).get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    return method if method in EXPERT_FORMATS else None


def expert_compute_dtype(hardware: HardwareSpec) -> str:
    """The activation dtype MXFP4 expert GEMMs run in on this part (module docstring)."""
    return "fp8" if hardware.peak_flops("fp4") else "bf16"


def served_precision(model: str, hardware: HardwareSpec) -> tuple[str, str | None]:
    """(weights dtype, experts spec or None) for serving the checkpoint as published.

    The experts spec is ``"<format>/<compute>"`` (:class:`infercast.cost.experts.ExpertPrecision`);
    weights fall back to BF16 when the config names no dtype.
    """
    fmt = checkpoint_expert_format(model)
    if fmt:
        return "bf16", f"{fmt}/{expert_compute_dtype(hardware)}"
    return checkpoint_weights(model) or "bf16", None


def resolve_precision(model: str, hardware: HardwareSpec, weights: str, experts: str | None) -> tuple[str, str | None, str]:
    """(weights dtype, experts spec or None, a note on where they come from) for a run.

    ``weights="checkpoint"`` serves the model as published (:func:`served_precision`); a
    stated dtype quantizes the whole model uniformly. ``experts`` (``"<format>/<compute>"``,
    or ``"none"``) overrides the experts either way; None keeps what ``weights`` implies.
    """
    from infercast.cost.experts import ExpertPrecision

    note, expert_spec = "", None
    if weights.strip().lower() == "checkpoint":
        weights, expert_spec = served_precision(model, hardware)
        note = f"weights as the checkpoint ships them: {weights}" + (
            f", routed experts {expert_spec.replace('/', ' with ')} compute" if expert_spec else "")
        if checkpoint_weights(model) is None and not expert_spec:
            note = "weights: the checkpoint's config names no dtype, bf16 assumed (pass --weights)"
    if experts is not None:
        expert_spec = None if experts.strip().lower() == "none" else experts
        if expert_spec:
            ExpertPrecision.parse(expert_spec)  # a bad spec fails here, naming the value
    return weights, expert_spec, note
