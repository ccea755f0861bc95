"""A replica scheduler's limits from a simulator config (aggregated and disaggregated pools)."""

from __future__ import annotations

from infercast.sched import SchedulerConfig
from infercast.sim.config import SimConfig


def scheduler_config(
    cfg: SimConfig, kv_capacity_tokens: int, compact: bool = True, host_blocks: int = 0
) -> SchedulerConfig:
    """The replica scheduler's limits; ``compact`` needs a cost that sees decode contexts by sum;
    ``host_blocks``: a host-memory KV tier's size (``sim/levers.py``), 0 = none."""
    s = cfg.scheduler
    num_blocks = s.num_blocks or max(1, kv_capacity_tokens // s.block_size)
    return SchedulerConfig(
        policy=s.policy,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        block_size=s.block_size,
        num_blocks=num_blocks,
        enable_prefix_caching=s.prefix_caching,
        max_model_len=s.max_model_len,
        emit_block_tables=False,
        compact_decodes=compact,
        host_blocks=host_blocks,
        admission=s.admission,
        new_token_ratio_init=s.new_token_ratio_init,
        new_token_ratio_min_factor=s.new_token_ratio_min_factor,
        new_token_ratio_decay_steps=s.new_token_ratio_decay_steps,
        clip_max_new_tokens=s.clip_max_new_tokens,
        retract_decode_steps=s.retract_decode_steps,
        adp_ranks=s.adp_ranks,
        adp_timeout_iters=s.adp_timeout_iters,
        adp_batching_wait_iters=s.adp_batching_wait_iters,
        max_prefill_tokens=s.max_prefill_tokens,
        batch_wait_timeout_iters=s.batch_wait_timeout_iters,
        batch_wait_max_tokens_ratio=s.batch_wait_max_tokens_ratio,
    )
