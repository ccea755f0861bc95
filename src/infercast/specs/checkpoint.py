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
from typing import Any

from infercast.specs.catalog import data_path
from infercast.specs.hardware import HardwareSpec

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16", "fp8": "fp8", "mxfp4": "fp4"}
EXPERT_FORMATS = ("mxfp4",)  # quant_method values that quantize only the routed experts


def checkpoint_config(model: str) -> dict:
    """The ``config.json`` of a preset name or a path (file or model directory); {} if
    unreadable."""
    path = data_path("models", f"{model.strip().lower()}.json")
    if not path.is_file():
        path = Path(model).expanduser()
        path = path / "config.json" if path.is_dir() else path
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def _quantized_dtype(quant: dict) -> str | None:
    """The weight dtype a ``quantization_config`` stores, for the common public formats; None if
    unknown.

    - ``fp8`` / ``fbgemm_fp8``: FP8; ``mxfp4``: FP4 (routed experts only, see above).
    - ``gptq`` / ``awq`` / ``bitsandbytes``: INT4 or INT8 from ``bits`` (``w_bit``,
      ``load_in_4bit`` / ``load_in_8bit``): weight-only, W4A16.
    - ``compressed-tensors`` (llm-compressor): the first config group's ``weights``:
      ``num_bits`` 8 and ``type`` float -> FP8, int -> INT8; 4 bits -> INT4, or FP4 for
      the ``nvfp4-pack-quantized`` format.
    - ``modelopt`` (NVIDIA Model Optimizer): ``quant_algo`` FP8 / NVFP4 / W4A16_AWQ.
    """
    method = str(quant.get("quant_method", "")).lower()
    if method in _DTYPES:
        return _DTYPES[method]
    if method == "fbgemm_fp8":
        return "fp8"
    if method in ("gptq", "awq", "bitsandbytes"):
        if quant.get("load_in_4bit"):
            return "int4"
        if quant.get("load_in_8bit"):
            return "int8"
        bits = quant.get("bits", quant.get("w_bit"))
        return {4: "int4", 8: "int8"}.get(int(bits)) if isinstance(bits, int | float) else None
    if method == "compressed-tensors":
        groups = quant.get("config_groups") or {}
        first: Any = next(iter(groups.values()), {}) if isinstance(groups, dict) else {}
        w = first.get("weights") or {} if isinstance(first, dict) else {}
        bits, kind = w.get("num_bits"), str(w.get("type", "")).lower()
        if bits == 8:
            return "fp8" if kind == "float" else "int8"
        if bits == 4:
            return (
                "fp4"
                if "fp4" in str(quant.get("format", "")).lower() or kind == "float"
                else "int4"
            )
        return None
    if method == "modelopt":
        algo = str(quant.get("quant_algo", "")).upper()
        return {"FP8": "fp8", "NVFP4": "fp4", "W4A16_AWQ": "int4", "W4A8_AWQ": "int4"}.get(algo)
    return None


def checkpoint_weights(model: str) -> str | None:
    """The weight dtype the checkpoint ships in (module docstring), or None if its config does not
    say (or names a quantization method this does not know: :func:`unknown_quantization`)."""
    cfg = checkpoint_config(model)
    quant = cfg.get("quantization_config") or {}
    if quant:
        return _quantized_dtype(quant)
    key = cfg.get("torch_dtype")
    return _DTYPES.get(key.lower()) if isinstance(key, str) else None


def unknown_quantization(model: str) -> str | None:
    """The ``quant_method`` of a checkpoint whose quantization this module cannot read, else
    None."""
    quant = checkpoint_config(model).get("quantization_config") or {}
    if quant and _quantized_dtype(quant) is None:
        return str(quant.get("quant_method") or "unnamed")
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
