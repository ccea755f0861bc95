"""Block manager: all-or-nothing allocation, ref counts, prefix cache, eviction order."""

from infercast.sched.kv_cache import BlockManager, cdiv, hash_token_blocks, synthetic_block_hashes


def test_allocation_is_all_or_nothing():
    kv = BlockManager(num_blocks=4, block_size=16)
    a = kv.allocate(3)
    assert a is not None and len(set(a)) == 3
    assert kv.allocate(2) is None
    assert kv.num_free_blocks == 1
    kv.free(a)
    assert kv.num_free_blocks == 4
    kv.check_invariants()


def test_prefix_hit_shares_and_survives_free_until_evicted():
    kv = BlockManager(num_blocks=4, block_size=4, enable_prefix_caching=True)
    hashes = hash_token_blocks(list(range(8)), 4)
    blocks = kv.allocate(2)
    for b, h in zip(blocks, hashes, strict=True):
        kv.register(b, h)
    assert kv.match_prefix(hashes, 2) == blocks
    kv.share(blocks)  # a second request reuses both
    assert [kv.ref_counts[b] for b in blocks] == [2, 2]
    kv.free(blocks)
    kv.free(blocks)
    assert kv.num_free_blocks == 4
    assert kv.match_prefix(hashes, 2) == blocks  # still cached while free
    taken = kv.allocate(3)  # 2 plain free blocks first, then one eviction (the tail block)
    assert kv.num_evictions == 1
    assert kv.match_prefix(hashes, 2) == blocks[:1]
    kv.free(taken)
    kv.check_invariants()


def test_block_hashes_are_chained_and_synthetic_ones_group():
    a = hash_token_blocks([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = hash_token_blocks([0, 2, 3, 4, 5, 6, 7, 8], 4)
    assert len(a) == 2 and a[1] != b[1]  # same second block, different history
    assert synthetic_block_hashes(3, 40, 16) == synthetic_block_hashes(3, 47, 16)
    assert synthetic_block_hashes(3, 40, 16) != synthetic_block_hashes(4, 40, 16)
    assert cdiv(17, 16) == 2 and cdiv(16, 16) == 1
