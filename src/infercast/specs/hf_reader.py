"""Reading a Hugging Face ``config.json`` into a :class:`~infercast.specs.model.ModelSpec`.

One entry point, :func:`model_from_hf_config`, over the readers of
:mod:`infercast.specs.hf_config` (the first families) and :mod:`infercast.specs.hf_families`
(those added later, built on the first module's helpers), the multimodal wrappers whose
text model sits in ``text_config``, and the generic Llama-like reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from infercast.errors import ModelConfigError
from infercast.specs.hf_config import READERS, Cfg
from infercast.specs.hf_families import FAMILY_READERS, llama_like, llama_like_problem
from infercast.specs.model import ModelSpec

# The text model type inside a multimodal wrapper whose text_config names none.
WRAPPED_TEXT_TYPE = {"gemma3": "gemma3_text", "mistral3": "mistral"}


def _text_model(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """gemma3 / mistral3 (``...ForConditionalGeneration``): the text model in ``text_config``."""
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        raise ModelConfigError(
            f"config.json ({arch}) misses field 'text_config': add the text model's config"
        )
    inner = dict(text)
    inner["model_type"] = text.get("model_type") or WRAPPED_TEXT_TYPE.get(arch, "")
    if "tie_word_embeddings" not in inner and "tie_word_embeddings" in cfg:
        inner["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    spec = model_from_hf_config(inner, name)
    note = "text model only: the vision encoder is not counted"
    return replace(spec, arch=arch, notes=spec.notes + (note,))


WRAPPERS: dict[str, Callable[[Cfg, str, str], ModelSpec]] = {
    "gemma3": _text_model,
    "mistral3": _text_model,
}


def model_from_hf_config(cfg: Cfg, name: str = "custom") -> ModelSpec:
    """Normalize a Hugging Face config dict into a :class:`ModelSpec`."""
    if not isinstance(cfg, Mapping):
        raise ModelConfigError(
            f"config for {name!r} must be a JSON object, got {type(cfg).__name__}"
        )
    arch = cfg.get("model_type")
    if not arch:
        raise ModelConfigError(
            f"config.json for {name!r} misses field 'model_type': add it (e.g. \"llama\")"
        )
    readers = {**READERS, **FAMILY_READERS, **WRAPPERS}
    reader = readers.get(str(arch))
    if reader is not None:
        return reader(cfg, str(arch), name)
    problem = llama_like_problem(cfg)
    if not problem:
        return llama_like(cfg, str(arch), name)
    known = ", ".join(sorted(readers))
    raise ModelConfigError(
        f"unsupported model_type {arch!r} in {name!r}: no reader for it and not Llama-like "
        f"({problem}); supported are {known}"
    )
