"""The engine's model configuration: a Llama-architecture transformer, frozen and validated.

Built from a Hugging Face ``config.json`` dict, from GGUF metadata, or from a
named random-weight size (:data:`NAMED_SIZES`). Only what the forward pass
needs lives here; the cost model's richer :class:`~infercast.specs.model.ModelSpec`
is derived from :meth:`EngineModelConfig.to_hf_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from infercast.errors import ModelConfigError

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "factors")


@dataclass(frozen=True)
class EngineModelConfig:
    """Shapes and constants of a Llama-architecture decoder (HF ``LlamaConfig`` names)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    head_dim: int = 0  # 0 -> hidden_size // num_heads
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Mapping[str, Any] | None = None
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 2048
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    name: str = "llama"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden_size // max(self.num_heads, 1))
        for key in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "intermediate_size",
            "vocab_size",
            "head_dim",
        ):
            if getattr(self, key) <= 0:
                raise ModelConfigError(f"model config {key}={getattr(self, key)} must be > 0")
        if self.num_heads % self.num_kv_heads:
            raise ModelConfigError(
                f"num_attention_heads={self.num_heads} is not a multiple of "
                f"num_key_value_heads={self.num_kv_heads}; fix the config"
            )
        if self.head_dim % 2:
            raise ModelConfigError(f"head_dim={self.head_dim} must be even for RoPE")
        rope_type = rope_type_of(self.rope_scaling)
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise ModelConfigError(
                f"rope_scaling type {rope_type!r} is not supported; use one of "
                f"{SUPPORTED_ROPE_TYPES}"
            )

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def num_params(self) -> int:
        """Parameter count: embeddings, per-layer attention/MLP/norms, final norm, head."""
        h, f = self.hidden_size, self.intermediate_size
        per_layer = h * (self.q_size + 2 * self.kv_size) + self.q_size * h + 3 * h * f + 2 * h
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return self.vocab_size * h + self.num_layers * per_layer + h + head

    @classmethod
    def from_hf(cls, cfg: Mapping[str, Any], name: str = "llama") -> EngineModelConfig:
        """From a Hugging Face ``config.json`` dict of a Llama-architecture model."""
        archs = cfg.get("architectures") or ["LlamaForCausalLM"]
        if cfg.get("model_type", "llama") not in ("llama", "mistral") and not any(
            "Llama" in a for a in archs
        ):
            raise ModelConfigError(
                f"model_type={cfg.get('model_type')!r} is not a Llama-architecture model; "
                "the CPU engine runs Llama-style decoders only"
            )
        try:
            eos = cfg.get("eos_token_id")
            eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
            return cls(
                hidden_size=int(cfg["hidden_size"]),
                num_layers=int(cfg["num_hidden_layers"]),
                num_heads=int(cfg["num_attention_heads"]),
                num_kv_heads=int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"]),
                intermediate_size=int(cfg["intermediate_size"]),
                vocab_size=int(cfg["vocab_size"]),
                head_dim=int(cfg.get("head_dim") or 0),
                rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-5)),
                rope_theta=float(cfg.get("rope_theta", 10000.0)),
                rope_scaling=cfg.get("rope_scaling"),
                tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
                bos_token_id=cfg.get("bos_token_id"),
                eos_token_ids=eos_ids,
                name=name,
            )
        except KeyError as exc:
            raise ModelConfigError(f"model config misses field {exc.args[0]!r}") from None

    def to_hf_dict(self) -> dict[str, Any]:
        """A Hugging Face style ``config.json`` dict (what the cost model's ModelSpec reads)."""
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": dict(self.rope_scaling) if self.rope_scaling else None,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
            "bos_token_id": self.bos_token_id,
            "eos_token_id": list(self.eos_token_ids),
            "torch_dtype": "float32",
        }

    def replace(self, **changes: Any) -> EngineModelConfig:
        """A copy with some fields changed (validated again)."""
        return EngineModelConfig(**{**asdict(self), **changes})


def rope_type_of(scaling: Mapping[str, Any] | None) -> str:
    """HF names the type ``rope_type`` (new) or ``type`` (old); None means plain RoPE."""
    if not scaling:
        return "default"
    return str(scaling.get("rope_type", scaling.get("type", "default")))


# Random-weight sizes. "tiny" is for tests (byte vocabulary). "100m" has
# SmolLM2-135M's shape family at ~100M parameters; "1b" is TinyLlama-1.1B's shape
# (github.com/jzhang38/TinyLlama config: 2048 hidden, 22 layers, 32/4 heads, 5632 FFN).
NAMED_SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=160,
        vocab_size=260,
        max_position_embeddings=512,
        rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
    "tiny-llama3": dict(
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=1,
        intermediate_size=128,
        vocab_size=260,
        max_position_embeddings=512,
        rope_theta=500000.0,
        tie_word_embeddings=True,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    ),
    "100m": dict(
        hidden_size=768,
        num_layers=12,
        num_heads=12,
        num_kv_heads=4,
        intermediate_size=2048,
        vocab_size=32000,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        tie_word_embeddings=True,
    ),
    "1b": dict(
        hidden_size=2048,
        num_layers=22,
        num_heads=32,
        num_kv_heads=4,
        intermediate_size=5632,
        vocab_size=32000,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
}


def named_config(size: str) -> EngineModelConfig:
    """The config of a named random-weight size (``tiny``, ``100m``, ``1b`` ...)."""
    if size not in NAMED_SIZES:
        raise ModelConfigError(f"unknown engine size {size!r}; use one of {sorted(NAMED_SIZES)}")
    # Byte tokenizer: ids 0-255 are bytes, 256 = BOS, 257 = EOS (see tokenizer.ByteTokenizer).
    return EngineModelConfig(
        **NAMED_SIZES[size], bos_token_id=256, eos_token_ids=(257,), name=f"random-{size}"
    )
