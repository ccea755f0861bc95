"""Render chat messages to a prompt: the model's Jinja chat template, or a plain fallback.

Templates run in Jinja's sandbox with the options Hugging Face ``transformers``
uses (``trim_blocks``, ``lstrip_blocks``, ``raise_exception``), so the
templates shipped in GGUF metadata and ``tokenizer_config.json`` render as they
do there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infercast.errors import ConfigError


def _raise(message: str) -> None:
    raise ConfigError(f"chat template refused the messages: {message}")


def render_chat(
    messages: Sequence[dict[str, str]],
    template: str | None,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """The prompt text for ``messages`` ([{role, content}]), ending where the reply starts."""
    if not template:
        # No template: one "role: content" line per message, then the assistant's turn.
        lines = [f"{m['role']}: {m['content']}" for m in messages]
        return "\n".join(lines) + "\nassistant:"
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    try:
        return env.from_string(template).render(
            messages=list(messages),
            add_generation_prompt=True,
            bos_token=bos_token,
            eos_token=eos_token,
        )
    except TemplateError as exc:
        raise ConfigError(f"chat template failed to render: {exc}") from None


def token_text(tokenizer: Any, token_id: int | None) -> str:
    """The literal text of a special token (for templates that print bos/eos)."""
    tok = getattr(tokenizer, "tok", None)
    if tok is None or token_id is None:
        return ""
    return tok.id_to_token(token_id) or ""
