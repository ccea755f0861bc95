"""Tokenizers: a byte-level one for random weights, and BPE ones through ``tokenizers``.

Every tokenizer offers ``encode``/``decode``, ``bos_id``, ``eos_ids``,
``chat_template`` and ``vocab_size``. Streaming text comes from
:class:`IncrementalDecoder`, which never emits half a UTF-8 character.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from infercast.errors import ModelConfigError


class TextTokenizer(Protocol):
    bos_id: int | None
    eos_ids: tuple[int, ...]
    chat_template: str | None
    vocab_size: int
    add_bos: bool  # the model expects BOS before a plain prompt

    def encode(self, text: str, add_bos: bool = False) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255, BOS = 256, EOS = 257 (for random-weight models).

    Ids past 257 (a random model's larger vocabulary) decode as byte ``id % 256``
    so every sampled id shows as some text; such a model's text is noise anyway.
    """

    bos_id = 256
    eos_ids = (257,)
    chat_template = None
    add_bos = False

    def __init__(self, vocab_size: int = 260) -> None:
        self.vocab_size = vocab_size

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        data = bytes(i % 256 for i in ids if i not in (256, 257))
        return data.decode("utf-8", errors="replace")


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` with the model's special ids and chat template."""

    def __init__(
        self,
        tok: Any,
        bos_id: int | None,
        eos_ids: Sequence[int],
        chat_template: str | None,
        add_bos: bool = False,
    ) -> None:
        self.tok = tok
        self.bos_id = bos_id
        self.add_bos = add_bos and bos_id is not None
        self.eos_ids = tuple(eos_ids)
        self.chat_template = chat_template
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        """Ids of ``text``; special-token strings in it become their ids.

        ``add_bos`` prepends BOS when the model expects one (plain completions;
        chat templates write their own BOS into the text).
        """
        ids = self.tok.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_bos and self.add_bos else ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)


# Pre-tokenizer regexes by GGUF ``tokenizer.ggml.pre`` (llama.cpp src/llama-vocab.cpp).
_LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _gguf_pre_tokenizer(pre: str) -> Any:
    from tokenizers import Regex, pre_tokenizers

    if pre in ("smollm", "starcoder", "refact"):  # HF tokenizer.json of these models
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False),
            ]
        )
    if pre in ("llama-bpe", "llama3", "smaug-bpe"):
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_LLAMA3_REGEX), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    return pre_tokenizers.ByteLevel(add_prefix_space=False)


def tokenizer_from_gguf_fields(fields: Mapping[str, Any]) -> HFTokenizer:
    """Build the BPE tokenizer stored in GGUF metadata (``tokenizer.ggml.*``)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    kind = fields.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ModelConfigError(
            f"GGUF tokenizer model {kind!r} is not supported (only byte-level BPE 'gpt2'); "
            "use a Hugging Face directory with tokenizer.json instead"
        )
    tokens: list[str] = fields["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in fields.get("tokenizer.ggml.merges") or []]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = _gguf_pre_tokenizer(str(fields.get("tokenizer.ggml.pre", "")))
    tok.decoder = decoders.ByteLevel()
    types = fields.get("tokenizer.ggml.token_type") or []
    control = [t for t, ty in zip(tokens, types, strict=False) if ty in (3, 4)]  # CONTROL, USER
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    eos = [
        fields[k]
        for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id")
        if fields.get(k) is not None
    ]
    return HFTokenizer(
        tok,
        fields.get("tokenizer.ggml.bos_token_id"),
        sorted(set(eos)),
        fields.get("tokenizer.chat_template"),
        bool(fields.get("tokenizer.ggml.add_bos_token", False)),
    )


def tokenizer_from_hf_dir(path: Path, config: Mapping[str, Any]) -> HFTokenizer:
    """``tokenizer.json`` plus the chat template and EOS ids of a Hugging Face directory."""
    from tokenizers import Tokenizer

    file = path / "tokenizer.json"
    if not file.exists():
        raise ModelConfigError(f"{path} has no tokenizer.json; add it or use a GGUF file")
    tok = Tokenizer.from_file(str(file))
    tc_file = path / "tokenizer_config.json"
    tc = json.loads(tc_file.read_text()) if tc_file.exists() else {}
    eos = config.get("eos_token_id")
    eos_ids = list(eos) if isinstance(eos, list) else ([] if eos is None else [eos])
    if isinstance(tc.get("eos_token"), str) and tok.token_to_id(tc["eos_token"]) is not None:
        eos_ids.append(tok.token_to_id(tc["eos_token"]))
    template = tc.get("chat_template")
    bos = config.get("bos_token_id")
    # Whether the tokenizer's own post-processor puts BOS first decides add_bos.
    adds_bos = bos is not None and tok.encode("a", add_special_tokens=True).ids[:1] == [bos]
    return HFTokenizer(
        tok, bos, sorted(set(eos_ids)), template if isinstance(template, str) else None, adds_bos
    )


class IncrementalDecoder:
    """Turns a growing list of ids into text deltas (vLLM's prefix/read offsets idea).

    Decoding each id alone breaks multi-byte characters and BPE space handling,
    so each delta decodes a short window and holds back a trailing U+FFFD.
    """

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # window start
        self.read = 0  # ids already turned into text

    def push(self, token_id: int) -> str:
        """Add one id; returns the new text it completes (maybe empty)."""
        self.ids.append(token_id)
        before = self.tok.decode(self.ids[self.prefix : self.read])
        now = self.tok.decode(self.ids[self.prefix :])
        if now.endswith("\ufffd") or len(now) <= len(before):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return now[len(before) :]
