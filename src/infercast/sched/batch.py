"""The scheduler's output: plain data that the simulator costs and the engine executes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infercast.sched.request import Request


# Not ``frozen``: a frozen dataclass's __init__ sets each field through object.__setattr__
# (~0.9 us for these five; one is built per scheduled request per step). Read-only by convention.
@dataclass(slots=True)
class ScheduledSeq:
    """One request's share of a step (read-only by convention).

    ``num_new_tokens`` tokens are computed this step on top of
    ``num_cached_tokens`` already in the KV cache (a prefill chunk, a prefix-cache
    hit resumed, or 1 decode token; 1 + k for a speculative verify).
    ``block_table`` lists the physical KV blocks that hold positions
    ``0 .. num_cached_tokens + num_new_tokens - 1``. ``samples`` is True when the
    step ends with a sampled output token (a decode, or the last prefill chunk).
    ``req`` is the request itself (the scheduler's object: runners reach it without an id lookup).
    """

    request_id: str
    num_new_tokens: int
    num_cached_tokens: int
    block_table: tuple[int, ...] = ()
    samples: bool = True
    # State, not data: not compared. Set by the scheduler; None only in a batch built by hand.
    req: Request = field(default=None, compare=False, repr=False)  # type: ignore[assignment]


@dataclass(slots=True)
class Batch:
    """What one forward step runs (read-only by convention). Empty when nothing can run.

    ``num_decode_seqs`` / ``decode_cached_tokens`` are used only when the
    scheduler runs with ``compact_decodes=True`` (the simulator): then the
    one-token decodes of that many requests, whose cached contexts sum to
    ``decode_cached_tokens``, are part of the step without being listed in
    ``seqs``. With the default ``compact_decodes=False`` (the engine) every
    request is listed and both are 0.
    """

    seqs: tuple[ScheduledSeq, ...] = ()
    preempted: tuple[str, ...] = ()  # request ids preempted while building this batch
    num_decode_seqs: int = 0
    decode_cached_tokens: int = 0

    @property
    def num_tokens(self) -> int:
        """Total new tokens computed this step (the token budget it used)."""
        return sum(s.num_new_tokens for s in self.seqs) + self.num_decode_seqs

    @property
    def num_seqs(self) -> int:
        """Number of requests in the step."""
        return len(self.seqs) + self.num_decode_seqs

    @property
    def is_empty(self) -> bool:
        return not self.seqs and not self.num_decode_seqs
