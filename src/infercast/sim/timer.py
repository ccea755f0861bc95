"""The simulator's seam to the cost model: what a replica asks of its *step timer*.

:class:`StepTimer` is all a replica needs in exact mode (one event per step):
the time of a batch given each sequence's new and cached tokens, and the KV
capacity that sizes its block pool. :class:`AffineStepTimer` adds the decode
step's affine form the fast mode needs; :class:`FastStepTimer` adds the methods, which see a step as
sums (decode contexts enter a step's cost only through their sum under full attention): a decode
step's affine form for closed-form segments, and the mixed step of a decode group plus prefill
chunks without per-sequence lists. ``infercast.cost.step.StepModel`` is both;
a replica checks which one it got once, when it is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.kv_tier import KvReload


@runtime_checkable
class StepTimer(Protocol):
    """Times one model step of a batch (seconds)."""

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache the replica holds (its block pool's size)."""
        ...

    def step_time_s(self, new: Sequence[int], cached: Sequence[float]) -> float:
        """One step in which sequence i computes ``new[i]`` tokens over ``cached[i]`` cached."""
        ...


@runtime_checkable
class AffineStepTimer(StepTimer, Protocol):
    """A :class:`StepTimer` with a decode step's affine form (what the fast mode needs)."""

    @property
    def affine_context_limit(self) -> float:
        """Context length up to which :meth:`decode_affine` holds (inf: full attention)."""
        ...

    def decode_affine(self, num_seqs: int) -> tuple[float, float]:
        """(a, b): a decode step of ``num_seqs`` sequences whose contexts sum to S takes a + b*S."""
        ...


@runtime_checkable
class FastStepTimer(AffineStepTimer, Protocol):
    """An :class:`AffineStepTimer` that also times mixed steps from sums (no per-sequence lists)."""

    def mixed_step_time_s(
        self, num_decode: int, decode_cached_sum: float, new: Sequence[int], cached: Sequence[int]
    ) -> float:
        """``num_decode`` one-token decodes over contexts summing to ``decode_cached_sum``, plus
        prefill chunks of ``new[i]`` tokens over ``cached[i]``."""
        ...

    def chunk_step_time_s(self, num_decode: int, decode_cached_sum: float, n: int, c: int) -> float:
        """:meth:`mixed_step_time_s` with one prefill chunk of ``n`` tokens over ``c``."""
        ...


@runtime_checkable
class HostTierTimer(StepTimer, Protocol):
    """A :class:`StepTimer` with a host-memory KV tier (``sim/levers.py`` gives a ``StepModel``
    one): the tier's size in blocks, and the reload model a step waits on."""

    kv_host_blocks: int
    kv_reload: KvReload


@runtime_checkable
class ProfiledTimer(StepTimer, Protocol):
    """A :class:`StepTimer` priced by an efficiency profile, whose serving-front-end fields the
    simulated clients read (``request_admit_s``: requests reach the engine one at a time)."""

    profile: EfficiencyProfile


def host_blocks(timer: StepTimer) -> int:
    """Blocks of the timer's host KV tier; 0 without one."""
    return timer.kv_host_blocks if isinstance(timer, HostTierTimer) else 0


def affine_everywhere(timer: StepTimer) -> bool:
    """True when a decode step's affine form holds at every context (full attention)."""
    if not isinstance(timer, AffineStepTimer):
        return True
    return float(timer.affine_context_limit) == float("inf")


def request_admit_s(timer: StepTimer) -> float:
    """The front end's time to admit one request (0: requests reach the engine at once)."""
    return timer.profile.request_admit_s if isinstance(timer, ProfiledTimer) else 0.0
