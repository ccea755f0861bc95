"""Numeric precision of a deployment: weight storage, compute and KV-cache dtypes are separate.

Why three knobs: the regimes behave differently on a roofline.
- W4A16 (``--weights int4``) streams 4-bit weights (a memory-bound win) but
  dequantizes and multiplies on the 16-bit tensor cores, so a compute-bound
  (busy) server gains nothing: the seed's "INT4 does not speed up a busy server"
  falls out of ``compute = bf16``, not a special case.
- W8A8 / FP8 (``--weights fp8``) halves the bytes *and* uses the 8-bit peak.
- The KV cache has its own dtype (FP8 KV with BF16 weights is common).
"""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import UnknownDtypeError

# Bytes per element of each storage dtype.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}

# Quantization scale bytes per weight element, for the common public formats:
# - int4: group-wise (GPTQ/AWQ), group 128, one fp16 scale + one 4-bit zero per group
#   -> (2 + 0.5) / 128 bytes per weight.
# - fp4: NVFP4, 16-element micro-blocks with one fp8 (e4m3) scale -> 1/16 byte per weight
#   (MXFP4 uses 32-element blocks with an e8m0 scale -> 1/32; NVFP4 is the larger, so the
#   floor is not understated when the format is unknown).
# - fp8 / int8: per-tensor or per-channel scales, negligible (< 0.01%) -> 0.
SCALE_BYTES_PER_WEIGHT: dict[str, float] = {
    "fp32": 0.0,
    "bf16": 0.0,
    "fp16": 0.0,
    "fp8": 0.0,
    "int8": 0.0,
    "int4": 2.5 / 128,
    "fp4": 1.0 / 16,
}

# Compute dtype implied by a weight dtype when none is given.
# int4 is weight-only (W4A16): the matmul runs on the 16-bit peak.
DEFAULT_COMPUTE: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "bf16",
    "fp4": "fp4",
}

KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")

ALIASES = {
    "float32": "fp32",
    "f32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "f16": "fp16",
    "e4m3": "fp8",
    "fp8_e4m3": "fp8",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "w4a16": "int4",
    "w8a8": "int8",
}


def normalize_dtype(name: str, what: str = "dtype") -> str:
    """Canonical dtype name, or UnknownDtypeError naming the value and the choices."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        choices = ", ".join(DTYPE_BYTES)
        raise UnknownDtypeError(f"unknown {what} {name!r}: use one of {choices}")
    return key


@dataclass(frozen=True, slots=True)
class Precision:
    """Storage dtype of weights, dtype the matmuls compute in, and KV-cache dtype.

    ``activation_bytes`` is the width of activations between ops (16-bit for all
    GPU regimes here, fp32 on the CPU engine): FP8 GEMMs quantize their input on
    the fly but the residual stream stays 16-bit.

    ``head_weights``: the LM head's own storage dtype when it differs from the layers' (None:
    ``weights``): llama.cpp's quantizer gives the output matrix its own type, above the
    layers' (``llama_tensor_get_type``, src/llama-quant.cpp), and SmolLM2-135M-Instruct's
    Q4_1 GGUF stores its tied embedding/head as Q8_0 (its tensor types, read with ``gguf``'s
    GGUFReader), which the CPU engine keeps as int8 (``serve --weights auto``: ``q4+int8``).
    """

    weights: str = "bf16"
    compute: str = "bf16"
    kv_cache: str = "bf16"
    head_weights: str | None = None

    @classmethod
    def parse(
        cls,
        weights: str = "bf16",
        kv_cache: str | None = None,
        compute: str | None = None,
        head_weights: str | None = None,
    ) -> Precision:
        """Build from user strings; compute defaults from the weights, KV to 16-bit, the LM
        head to the weights' dtype (``head_weights`` None or equal to ``weights``)."""
        w = normalize_dtype(weights, "weights dtype")
        c = normalize_dtype(compute, "compute dtype") if compute else DEFAULT_COMPUTE[w]
        if kv_cache:
            kv = normalize_dtype(kv_cache, "kv-cache dtype")
        else:
            kv = "fp32" if w == "fp32" else ("fp16" if w == "fp16" else "bf16")
        head = normalize_dtype(head_weights, "LM head dtype") if head_weights else None
        return cls(weights=w, compute=c, kv_cache=kv, head_weights=None if head == w else head)

    @property
    def weight_bytes(self) -> float:
        """Bytes per stored weight, including quantization scales."""
        return DTYPE_BYTES[self.weights] + SCALE_BYTES_PER_WEIGHT[self.weights]

    @property
    def head_weight_bytes(self) -> float:
        """Bytes per stored LM-head weight (scales included): ``head_weights``', else
        :attr:`weight_bytes`."""
        h = self.head_weights
        return self.weight_bytes if h is None else DTYPE_BYTES[h] + SCALE_BYTES_PER_WEIGHT[h]

    @property
    def kv_bytes(self) -> float:
        """Bytes per KV-cache element (scales of 8-bit KV are per-tensor: negligible)."""
        return DTYPE_BYTES[self.kv_cache] + SCALE_BYTES_PER_WEIGHT[self.kv_cache]

    @property
    def activation_bytes(self) -> float:
        """Bytes per activation element between ops."""
        return 4.0 if self.compute == "fp32" else 2.0

    @property
    def label(self) -> str:
        """Short human label, e.g. 'W fp8 / A fp8 / KV fp8'."""
        head = f" (head {self.head_weights})" if self.head_weights else ""
        return f"W {self.weights}{head} / A {self.compute} / KV {self.kv_cache}"
