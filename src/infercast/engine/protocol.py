"""OpenAI API request bodies (validated) and response/chunk builders.

Shapes follow the OpenAI API reference for ``/v1/completions`` and
``/v1/chat/completions`` (``text_completion``, ``chat.completion`` and
``chat.completion.chunk`` objects, ``usage``, ``stream_options.include_usage``).
Parameters the engine does not implement are accepted only at their neutral
value (``n=1``, zero penalties), so a client never silently gets something else.

Validation is strict: a value of the wrong JSON type is refused, never coerced
(``"max_tokens": "4"`` or ``true`` is a 400, not 4 or 1); numbers must be
finite; every string must be encodable as UTF-8 (a lone surrogate such as
``"\ud800"`` is a 400 here, not a crash in the tokenizer).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infercast.engine.sampling import SEED_MAX, SEED_MIN, SamplingParams

# Strict types, finite numbers, unknown fields ignored (clients send many).
_STRICT = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


def _first_unencodable(value: Any, path: str) -> str | None:
    """The path of the first string in ``value`` that is not valid Unicode text, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        bad = _first_unencodable(item, f"{path}.{key}" if path else str(key))
        if bad is not None:
            return bad
    return None


class StreamOptions(BaseModel):
    model_config = _STRICT

    include_usage: bool = False


class _Common(BaseModel):
    model_config = _STRICT

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    n: Literal[1] = 1
    seed: int | None = Field(default=None, ge=SEED_MIN, le=SEED_MAX)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    user: str | None = None
    # Not implemented: accepted only at their neutral values, so nobody gets silently less.
    logprobs: Literal[False] | None = None
    best_of: Literal[1] | None = None
    echo: Literal[False] = False
    logit_bias: dict[str, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        bad = _first_unencodable(data, "")
        if bad is not None:
            raise ValueError(
                f"{bad} is not valid Unicode text (a lone surrogate such as "
                "\\ud800); send UTF-8 text"
            )
        return data

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _no_penalty(cls, v: float) -> float:
        if v != 0:
            raise ValueError("penalties are not supported by this server; send 0")
        return v

    @field_validator("logit_bias")
    @classmethod
    def _no_bias(cls, v: dict | None) -> dict | None:
        if v:
            raise ValueError("logit_bias is not supported by this server")
        return v

    @field_validator("stop")
    @classmethod
    def _stop_nonempty(cls, v: str | list[str] | None) -> str | list[str] | None:
        stops = [v] if isinstance(v, str) else (v or [])
        if any(not s for s in stops) or len(stops) > 4:
            raise ValueError("stop must be up to 4 non-empty strings")
        return v

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            max_tokens=self.max_tokens or default_max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=self.seed,
            stop=tuple(stops),
            ignore_eos=self.ignore_eos,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class CompletionRequest(_Common):
    """Body of POST /v1/completions (one prompt: a string or token ids)."""

    prompt: str | list[int] | list[str]
    max_tokens: int | None = Field(default=16, ge=1)

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, v: Any) -> Any:
        if isinstance(v, list) and v and isinstance(v[0], str):
            if len(v) != 1:
                raise ValueError("only one prompt per request is supported")
            return v[0]
        if isinstance(v, list) and not v:
            raise ValueError("prompt must not be empty")
        return v


class ChatMessage(BaseModel):
    model_config = _STRICT

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: keep the text ones
            return "".join(p.get("text", "") for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatRequest(_Common):
    """Body of POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        if self.max_completion_tokens and not self.max_tokens:
            self.max_tokens = self.max_completion_tokens
        return super().sampling(default_max_tokens)


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    """OpenAI's usage object, with ``prompt_tokens_details.cached_tokens`` as OpenAI and vLLM."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def openai_finish(reason: str | None) -> str | None:
    """Engine finish reasons to OpenAI's (abort/error have no OpenAI name: report stop)."""
    return {"abort": "stop", "error": "stop"}.get(reason, reason) if reason else None


def completion_body(
    rid: str,
    created: int,
    model: str,
    text: str,
    reason: str | None,
    use: dict | None,
    chunk: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "text": text, "logprobs": None, "finish_reason": openai_finish(reason)}
        ],
    }
    if use is not None or not chunk:
        body["usage"] = use
    return body


def chat_body(
    rid: str, created: int, model: str, text: str, reason: str | None, use: dict
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": openai_finish(reason),
            }
        ],
        "usage": use,
    }


def chat_chunk(
    rid: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    reason: str | None = None,
    use: dict | None = None,
) -> dict[str, Any]:
    choices = (
        []
        if delta is None
        else [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": openai_finish(reason)}
        ]
    )
    body: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if use is not None:
        body["usage"] = use
    return body


def usage_chunk(rid: str, created: int, model: str, obj: str, use: dict) -> dict[str, Any]:
    """The final ``choices: []`` chunk carrying usage (stream_options.include_usage)."""
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [],
        "usage": use,
    }


def error_body(
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
