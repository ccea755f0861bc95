"""Scheduling: request state machine, paged KV block manager, batching policies.

Hardware-free (tokens and blocks, never seconds or bytes) so the simulator and
the CPU engine share it unchanged. Entry points: :class:`Scheduler`,
:class:`SchedulerConfig`, :class:`Request`, :class:`Batch`; ``POLICY_NAMES`` lists the
batching policies ``SchedulerConfig.policy`` accepts.
"""

from infercast.sched.batch import Batch, ScheduledSeq
from infercast.sched.kv_cache import BlockManager, hash_token_blocks, synthetic_block_hashes
from infercast.sched.request import Request, RequestStatus
from infercast.sched.scheduler import POLICY_NAMES, Scheduler, SchedulerConfig

__all__ = [
    "POLICY_NAMES",
    "Batch",
    "BlockManager",
    "Request",
    "RequestStatus",
    "ScheduledSeq",
    "Scheduler",
    "SchedulerConfig",
    "hash_token_blocks",
    "synthetic_block_hashes",
]
