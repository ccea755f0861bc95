"""The host-memory KV tier (sched/host_tier.py) under the block manager and the scheduler."""

import pytest

from infercast.errors import ConfigError
from infercast.sched.host_tier import HostTier
from infercast.sched.kv_cache import BlockManager

from .helpers import check_step, make_scheduler, req


def _fill(kv: BlockManager, hashes) -> list[int]:
    blocks = kv.take(len(hashes))
    for b, h in zip(blocks, hashes, strict=True):
        kv.register(b, h)
    kv.give(blocks)
    return blocks


def test_evicted_prefix_blocks_come_back_from_host_memory():
    tier = HostTier(8)
    kv = BlockManager(4, 4, enable_prefix_caching=True, host_tier=tier)
    _fill(kv, (11, 12, 13))  # three cached-free blocks
    kv.take(4)  # takes every block: the three cached ones are evicted into the tier
    assert tier.num_stored == 3 and kv.match_prefix((11, 12, 13), 3) == []  # no HBM room to restore
    kv.check_invariants()


def test_a_match_restores_the_run_the_tier_holds_and_counts_the_copy():
    tier = HostTier(8)
    kv = BlockManager(6, 4, enable_prefix_caching=True, host_tier=tier)
    _fill(kv, (11, 12, 13))
    taken = kv.take(6)  # evicts 11, 12, 13 to host
    kv.give(taken[:4])  # four plain free blocks again
    hits = kv.match_prefix((11, 12, 13, 99), 4)
    assert len(hits) == 3 and tier.take_loaded() == 3 and tier.take_loaded() == 0
    kv.share(hits)  # the scheduler shares them like any HBM hit
    kv.check_invariants()
    assert tier.num_loaded == 3


def test_host_memory_drops_least_recently_used_blocks():
    tier = HostTier(2)
    for h in (1, 2, 3):
        tier.store(h)
    assert tier.num_dropped == 1 and tier.match((1,)) == 0 and tier.match((2, 3)) == 2


def test_the_tier_needs_prefix_caching():
    with pytest.raises(ConfigError, match="prefix caching"):
        BlockManager(4, 4, host_tier=HostTier(4))
    with pytest.raises(ConfigError, match="at least 1 block"):
        HostTier(0)


def test_scheduler_reuses_an_offloaded_prefix_instead_of_recomputing_it():
    prefix = tuple(range(100, 104))  # 4 blocks of 4 tokens
    for host_blocks, expect_cached in ((0, 0), (16, 16)):
        s = make_scheduler(
            num_blocks=8, block_size=4, enable_prefix_caching=True, host_blocks=host_blocks
        )
        s.add_request(req(0, 17, 1, prefix))
        while s.has_unfinished:  # the first request computes and registers the prefix
            b = s.schedule()
            check_step(s, b)
            s.update(b)
        s.add_request(req(1, 30, 1))  # a stranger needs 8 blocks: the prefix is evicted
        b = s.schedule()
        check_step(s, b)
        s.update(b)
        while s.has_unfinished:
            s.update(s.schedule())
        s.add_request(req(2, 17, 1, prefix))  # the prefix again
        b = s.schedule()
        check_step(s, b)
        assert b.seqs[0].num_cached_tokens == expect_cached
        if host_blocks:
            assert s.kv.host_tier.take_loaded() == 4
