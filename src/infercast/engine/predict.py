"""The cost model's view of the CPU engine: a StepModel for the loaded model on this machine.

The numpy engine keeps float32 KV and computes its matmuls in float32 in every weight format
(:data:`ENGINE_COMPUTE`); the weights are costed in the format they are kept in; the hardware
is the profile ``infercast machine`` writes. This is what lets ``estimate``/``simulate``
predict the engine that ``serve`` runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercast.engine.config import EngineModelConfig
from infercast.engine.weights import ModelWeights


def model_spec(cfg: EngineModelConfig):
    """The :class:`~infercast.specs.model.ModelSpec` of an engine config."""
    from infercast.specs.hf_reader import model_from_hf_config

    return model_from_hf_config(cfg.to_hf_dict(), cfg.name)


def hardware_from_probe(result: Mapping[str, Any]):
    """A HardwareSpec from :func:`infercast.engine.machine_probe.probe`'s result."""
    from infercast.engine.machine_probe import profile_mapping
    from infercast.specs.hardware import hardware_from_mapping

    return hardware_from_mapping(profile_mapping(dict(result)), "infercast machine (in process)")


# ``serve --weights`` formats as the cost model's weight precisions (a mixed file such as
# SmolLM2's ``q4+int8``, Q4_1 layers and a Q8_0 head: :func:`layer_and_head`).
WEIGHT_PRECISION = {"fp32": "fp32", "bf16": "bf16", "int8": "int8", "q4": "int4"}


def layer_and_head(weights: str) -> tuple[str, str]:
    """(the layers' format, the LM head's) of a ``serve --weights`` format or a loaded model's
    ``weights_format``: ``q4+int8`` is 4-bit layers and an int8 head (``loader.weights_format``
    lists the layers' format first and the head's last when it differs); a single format is
    both."""
    parts = weights.split("+")
    return parts[0], parts[-1]


def precision(weights: str = "fp32", backend: str = "numpy", hardware=None):
    """The cost model's :class:`~infercast.specs.precision.Precision` of the engine running
    ``weights`` (a mixed ``q4+int8`` prices its head at the head's own bytes) on ``backend``:
    fp32 KV, compute :func:`compute_dtype` (on ``hardware`` when given); torch: bf16 weights
    and matmuls."""
    from infercast.specs.precision import Precision

    dtype = compute_dtype(weights, backend, hardware)
    if backend == "torch":
        return Precision.parse(weights=dtype, kv_cache="fp32", compute=dtype)
    layers, head = layer_and_head(weights)
    return Precision.parse(
        weights=WEIGHT_PRECISION[layers],
        kv_cache="fp32",
        compute=dtype,
        head_weights=WEIGHT_PRECISION[head],
    )


# The dtype the numpy engine's matmuls compute in, per ``serve --weights`` format: the peak
# the cost model prices its products at, and the one ``infercast machine`` fits its efficiency
# profile against (and records in it: ``compute``), so a simulation with that profile prices
# the same products at the same peak. float32 in every format (engine/qlinear.py,
# infercast 0.1): fp32 runs numpy/OpenBLAS; bf16, int8 and q4 products of more than
# ``KERNEL_MAX_TOKENS`` (48) tokens widen the matrix into a float32 buffer and run OpenBLAS
# (``Bf16Matrix.matmul_fm`` too: ``copy_`` into the buffer, then ``w @ x``), and the numba
# loops of up to 48 tokens (bf16, int8; q4 up to ``Q4_JIT_MAX_TOKENS``) widen each weight
# in registers and multiply float32 activations (engine/decode_jit.py). Only PyTorch's
# kernels (int8 of 9-48 on AVX-512 CPUs; bf16 of 5-48 on AVX-512 BF16 ones; every compact
# product without numba: q4 keeps no PyTorch packing where numba runs) take bf16
# activations: small-M products whose rate the fitted profile absorbs. The torch backend is
# bf16. Where q4 and int8 prefill runs the integer kernels (``qlinear.integer_prefill``: their
# products beyond 48 tokens, int8 activations), those two compute in ``int8`` instead
# (:func:`compute_dtype`), priced at the int8 peak ``infercast machine`` measures with those
# kernels (``machine_probe.matmul_ops_integer``).
ENGINE_COMPUTE = {"fp32": "fp32", "bf16": "fp32", "int8": "fp32", "q4": "fp32"}


def compute_dtype(weights: str = "fp32", backend: str = "numpy", hardware=None) -> str:
    """The cost model's compute dtype of the engine for ``weights`` (a ``serve --weights``
    format, or a mixed one such as ``q4+int8``: its layers' format) on ``backend``: int8 where
    the format's prefill runs the integer kernels on this CPU and ``hardware`` (when given)
    has an int8 peak, else :data:`ENGINE_COMPUTE`."""
    if backend == "torch":
        return "bf16"
    from infercast.engine.qlinear import integer_prefill

    layers = weights.split("+")[0]
    if integer_prefill(layers) and (hardware is None or hardware.peak_flops("int8")):
        return "int8"
    return ENGINE_COMPUTE[layers]


def step_model(
    cfg: EngineModelConfig,
    hardware,
    profile=None,
    max_seqs: int = 256,
    backend: str = "numpy",
    weights: str = "fp32",
):
    """A :class:`~infercast.cost.step.StepModel` for the engine.

    numpy: fp32 KV, compute :func:`compute_dtype`, weights as kept (``weights``: the loaded
    model's ``weights_format``, the head at its own format). torch: bf16 weights and matmuls,
    fp32 KV (:func:`precision`).
    """
    from infercast.cost.step import StepModel

    prec = precision(weights, backend, hardware)
    return StepModel(model_spec(cfg), hardware, prec, profile=profile, max_seqs=max_seqs)


def decode_read_bytes(
    cfg: EngineModelConfig, w: ModelWeights, contexts: list[int], weight_bytes: float | None = None
) -> float:
    """Bytes one decode step must read: every weight matrix once, plus each sequence's KV.

    The embedding table is not read in full (one row per token) unless it is
    also the tied output head. KV: 2 (K, V) x layers x kv_heads x head_dim x 4 bytes
    per cached token. ``weight_bytes`` overrides the float32 weights (torch: bf16).
    """
    weights = w.nbytes - (0 if w.lm_head is w.embed else w.embed.nbytes)
    if weight_bytes is not None:
        weights = weight_bytes
    kv_per_token = 2 * cfg.num_layers * cfg.kv_size * 4
    return float(weights + kv_per_token * sum(contexts))


def matmul_flops(cfg: EngineModelConfig, new_tokens: int, context_tokens: int) -> float:
    """FLOPs of one sequence's step: 2 x params x tokens in the matmuls, plus attention.

    Attention: QK^T and PV each cost 2 x heads x head_dim per (query, key) pair,
    and query i sees context_tokens + i + 1 keys (causal): Kaplan et al. 2020, Table 1.
    """
    h, f = cfg.hidden_size, cfg.intermediate_size
    per_layer = h * (cfg.q_size + 2 * cfg.kv_size) + cfg.q_size * h + 3 * h * f
    linear = 2.0 * (cfg.num_layers * per_layer) * new_tokens + 2.0 * cfg.vocab_size * h
    pairs = new_tokens * context_tokens + new_tokens * (new_tokens + 1) / 2
    attention = 4.0 * cfg.num_layers * cfg.q_size * pairs
    return linear + attention
