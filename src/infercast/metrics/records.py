"""The one per-request record emitted by the simulator, the CPU engine and the bench client.

Times are seconds on one clock per run (simulated time, or the engine/client's
monotonic clock). Definitions of the metrics derived from it are in
``docs/metrics.md`` and implemented once in :mod:`infercast.metrics.summary`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Where an output-token count came from (bench: usage > tokenizer > chunks).
TOKEN_COUNT_SOURCES = ("exact", "usage", "tokenizer", "chunks")


@dataclass(slots=True)
class RequestRecord:
    """Timestamps and counts of one request.

    ``arrival_s`` is the arrival (simulator, engine) or the *scheduled* send time
    (bench client), so client-side queueing shows in TTFT instead of hiding.
    ``chunk_times_s[i]`` is when output chunk i arrived and ``chunk_tokens[i]``
    how many tokens it carried (``None`` means one token per chunk, as the
    simulator and engine emit). The first chunk is the first one carrying real
    text: an empty role chunk is never recorded.
    """

    request_id: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int = 0
    chunk_times_s: Sequence[float] | np.ndarray = field(default_factory=list)
    chunk_tokens: Sequence[int] | None = None
    finish_s: float | None = None
    first_scheduled_s: float | None = None  # first time a scheduler ran it (queueing delay)
    send_s: float | None = None  # bench: when the request actually left the client
    first_answer_s: float | None = None  # bench: first non-reasoning content, if reasoning exists
    finish_reason: str | None = None  # stop | length | abort | error | rejected
    error: str | None = None
    num_preemptions: int = 0
    cached_prompt_tokens: int | None = 0  # prompt tokens the prefix cache served (None: unknown)
    token_count_source: str = "exact"
    token_count_mismatch: str | None = None  # bench: sources disagree, e.g. "usage=32 tokenizer=35"

    @property
    def ok(self) -> bool:
        """True when the request completed without error and produced output."""
        return self.error is None and self.finish_reason not in ("error", "rejected", "abort")

    @property
    def first_token_s(self) -> float | None:
        """Time the first output token arrived, or None if none did."""
        return self.chunk_times_s[0] if len(self.chunk_times_s) else None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token: arrival (or scheduled send) to the first real token."""
        first = self.first_token_s
        return None if first is None else first - self.arrival_s

    @property
    def e2e_s(self) -> float | None:
        """End to end: arrival (or scheduled send) to the last token."""
        if not len(self.chunk_times_s):
            return None
        return self.chunk_times_s[-1] - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1), vLLM's definition; None for one token."""
        if self.output_tokens < 2 or not len(self.chunk_times_s):
            return None
        return (self.chunk_times_s[-1] - self.chunk_times_s[0]) / (self.output_tokens - 1)
