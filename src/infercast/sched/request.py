"""The request state machine the scheduler drives.

States (vLLM v1 names where they exist)::

    WAITING --admit--> RUNNING --last token--> FINISHED
       ^                  |   \\--abort-------> FINISHED (finish_reason="abort")
       +---preempt--------+
    (add_request) --cannot ever fit--> REJECTED

Token accounting follows vLLM v1: ``num_tokens`` = prompt + output tokens so
far; ``num_computed_tokens`` = tokens whose KV is in the cache. A step computes
``num_tokens - num_computed_tokens`` tokens (capped by the token budget) and,
when it reaches ``num_tokens``, samples one new output token. So a decoding
request computes exactly 1 token per step, and the last sampled token's KV is
never computed. Preemption by recompute drops the KV (``num_computed_tokens``
back to 0) and later recomputes prompt + output so far as a prefill.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field


class RequestStatus(enum.Enum):
    """Where a request is in its life."""

    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"  # waiting again after its KV was dropped
    FINISHED = "finished"
    REJECTED = "rejected"


@dataclass(slots=True, eq=False)
class Request:
    """One request as the scheduler sees it: token counts and KV blocks, no text.

    ``block_hashes[i]`` identifies the content of the sequence's full block i
    (chained, so it also identifies everything before it); only those blocks
    can be shared through the prefix cache. Hashes past the prompt (a known or
    growing answer) let a finished request leave its decoded blocks cached too. Build it with
    :func:`infercast.sched.kv_cache.hash_token_blocks` from real token ids
    (engine) or :func:`~infercast.sched.kv_cache.synthetic_block_hashes`
    (simulator). Leave it empty to never share.
    """

    request_id: str
    prompt_tokens: int
    max_output_tokens: int
    arrival_s: float = 0.0
    block_hashes: Sequence[int] = ()
    status: RequestStatus = RequestStatus.WAITING
    num_output_tokens: int = 0
    num_computed_tokens: int = 0
    num_cached_prompt_tokens: int = 0  # prefix-cache hit at the first admission
    num_preemptions: int = 0
    block_table: list[int] = field(default_factory=list)
    finish_reason: str | None = None  # stop | length | abort | rejected
    reject_reason: str | None = None
    num_registered_blocks: int = 0  # leading prompt blocks already in the prefix cache
    admitted: bool = False  # admitted at least once (first-admission stats)
    # Decode group (see Scheduler): while ``dbase >= 0`` the token counts above lag
    # by ``scheduler.dstep - dbase`` steps; the scheduler syncs them when it needs them.
    dbase: int = -1
    finish_dstep: int = 0
    group_phase: int = -1  # dstep % block_size at which it needs a new block; -1: KV reserved
    # The runner's bookkeeping (the scheduler never reads these): when it was first scheduled, its
    # output token times kept one by one, and (simulator) the index of its next decode token in its
    # replica's step timeline, -1 while its times are not there. Here rather than in a second
    # per-request object: the simulator builds one object less and looks up no id per step.
    first_scheduled_s: float | None = None
    token_times: list[float] = field(default_factory=list)
    timeline_start: int = -1

    @property
    def num_tokens(self) -> int:
        """Prompt plus output tokens so far (the last one not yet in the KV cache)."""
        return self.prompt_tokens + self.num_output_tokens

    @property
    def num_remaining_tokens(self) -> int:
        """Tokens to compute before the next sample (1 while decoding)."""
        return self.num_tokens - self.num_computed_tokens

    @property
    def is_decoding(self) -> bool:
        """True when running and the next step is a plain one-token decode."""
        return (
            self.status is RequestStatus.RUNNING
            and self.num_output_tokens > 0
            and self.num_computed_tokens == self.num_tokens - 1
        )

    @property
    def is_finished(self) -> bool:
        return self.status in (RequestStatus.FINISHED, RequestStatus.REJECTED)
