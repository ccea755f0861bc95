"""One request's generation state on the engine side: token ids, text, stop checks.

The scheduler's :class:`~infercast.sched.request.Request` knows only counts and
blocks; this object knows the tokens and the text, decides when the request
finishes (EOS, stop string, ``max_tokens``, context length) and keeps the
:class:`~infercast.metrics.records.RequestRecord` with its timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infercast.engine.sampling import SamplingParams
from infercast.engine.tokenizer import IncrementalDecoder, TextTokenizer
from infercast.metrics.records import RequestRecord


@dataclass(frozen=True)
class TokenEvent:
    """What one step produced for one request: text to send and whether it ended."""

    request_id: str
    token_id: int | None
    text: str
    finish_reason: str | None = None  # stop | length | abort | error
    error: str | None = None  # why, when finish_reason is "error"
    cached_prompt_tokens: int = 0  # on the finishing event: prompt tokens the prefix cache served

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


class Generation:
    """Prompt + output ids, streamed text and finish logic of one request."""

    def __init__(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        tokenizer: TextTokenizer,
        rng: np.random.Generator,
        arrival_s: float,
        max_model_len: int,
    ) -> None:
        self.request_id = request_id
        self.prompt_ids = list(prompt_ids)
        self.output_ids: list[int] = []
        self.params = params
        self.rng = rng
        self.max_model_len = max_model_len
        self.decoder = IncrementalDecoder(tokenizer)
        self.eos = set(params.stop_token_ids) | (
            set() if params.ignore_eos else set(tokenizer.eos_ids)
        )
        self.text = ""  # output text so far, cut at a stop string
        self.sent = 0  # characters of text already handed out
        self.hold = max((len(s) for s in params.stop), default=1) - 1
        self.finish_reason: str | None = None
        self.record = RequestRecord(
            request_id=request_id,
            arrival_s=arrival_s,
            prompt_tokens=len(prompt_ids),
            chunk_times_s=[],
        )

    def token_ids(self, start: int, stop: int) -> list[int]:
        """Ids at positions start..stop-1 of prompt + output."""
        n = len(self.prompt_ids)
        if stop <= n:
            return self.prompt_ids[start:stop]
        return (self.prompt_ids + self.output_ids)[start:stop]

    def append(self, token_id: int, now_s: float) -> TokenEvent:
        """Record a sampled token; returns the text it releases and any finish reason."""
        self.output_ids.append(token_id)
        self.record.output_tokens += 1
        self.record.chunk_times_s.append(now_s)
        if token_id in self.eos:
            return self.finish("stop", now_s, token_id)
        self.text += self.decoder.push(token_id)
        cut = self._find_stop()
        if cut is not None:
            self.text = self.text[:cut]
            return self.finish("stop", now_s, token_id)
        total = len(self.prompt_ids) + len(self.output_ids)
        if len(self.output_ids) >= self.params.max_tokens or total >= self.max_model_len:
            return self.finish("length", now_s, token_id)
        safe = max(len(self.text) - self.hold, self.sent)  # a stop string may still complete
        delta, self.sent = self.text[self.sent : safe], safe
        return TokenEvent(self.request_id, token_id, delta)

    def _find_stop(self) -> int | None:
        if not self.params.stop:
            return None
        # Only the tail can hold a new match: the last token's text plus a stop's length.
        start = max(self.sent - self.hold - 1, 0)
        hits = [i for s in self.params.stop if (i := self.text.find(s, start)) >= 0]
        return min(hits) if hits else None

    def finish(
        self, reason: str, now_s: float, token_id: int | None = None, error: str | None = None
    ) -> TokenEvent:
        """End the request; releases any held-back text (``error``: why it failed)."""
        self.finish_reason = reason
        self.record.finish_reason = reason
        self.record.finish_s = now_s
        self.record.error = error
        delta, self.sent = self.text[self.sent :], len(self.text)
        return TokenEvent(
            self.request_id, token_id, delta, reason, error, self.record.cached_prompt_tokens
        )
