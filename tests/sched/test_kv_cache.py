"""Block manager: all-or-nothing allocation, ref counts, prefix cache, eviction order."""

from infercast.sched.kv_cache import BlockManager, cdiv, hash_token_blocks, synthetic_block_hashes


def test_allocation_is_all_or_nothing():
    kv = BlockManager(num_blocks=4, block_size=16)
    a = kv.take(3)
    assert a is not None and len(set(a)) == 3
    assert kv.take(2) is None
    assert kv.num_free_blocks == 1
    kv.give(a)
    assert kv.num_free_blocks == 4
    kv.check_invariants()


def test_prefix_hit_shares_and_survives_free_until_evicted():
    kv = BlockManager(num_blocks=4, block_size=4, enable_prefix_caching=True)
    hashes = hash_token_blocks(list(range(8)), 4)
    blocks = kv.take(2)
    for b, h in zip(blocks, hashes, strict=True):
        kv.register(b, h)
    assert kv.match_prefix(hashes, 2) == blocks
    kv.share(blocks)  # a second request reuses both
    assert [kv.ref_counts[b] for b in blocks] == [2, 2]
    kv.give(blocks)
    kv.give(blocks)
    assert kv.num_free_blocks == 4
    assert kv.match_prefix(hashes, 2) == blocks  # still cached while free
    taken = kv.take(3)  # 2 plain free blocks first, then one eviction (the tail block)
    assert kv.num_evictions == 1
    assert kv.match_prefix(hashes, 2) == blocks[:1]
    kv.give(taken)
    kv.check_invariants()


def test_block_hashes_are_chained_and_synthetic_ones_group():
    a = hash_token_blocks([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = hash_token_blocks([0, 2, 3, 4, 5, 6, 7, 8], 4)
    assert len(a) == 2 and a[1] != b[1]  # same second block, different history
    assert synthetic_block_hashes(3, 40, 16) == synthetic_block_hashes(3, 47, 16)
    assert synthetic_block_hashes(3, 40, 16) != synthetic_block_hashes(4, 40, 16)
    assert cdiv(17, 16) == 2 and cdiv(16, 16) == 1


def test_free_block_counter_follows_the_pool_under_random_operations():
    """``num_free_blocks`` is a counter kept by take/give/share: it must equal the pool's size
    through evictions, shares and revivals (``check_invariants`` compares them)."""
    import random

    rng = random.Random(7)
    for caching in (False, True):
        kv = BlockManager(num_blocks=24, block_size=4, enable_prefix_caching=caching)
        owned: list[list[int]] = []
        for step in range(400):
            op = rng.random()
            if op < 0.45:
                blocks = kv.take(rng.randint(1, 6))
                if blocks is not None:
                    for b in blocks[: rng.randint(0, len(blocks))]:
                        kv.register(b, hash(("h", rng.randint(0, 30))))
                    owned.append(blocks)
            elif op < 0.75 and owned:
                kv.give(owned.pop(rng.randrange(len(owned))))
            elif caching:  # a prefix hit: share cached blocks (some may be free, some in use)
                hashes = [hash(("h", rng.randint(0, 30))) for _ in range(3)]
                hits = [b for b in (kv.match_prefix([h], 1) for h in hashes) for b in b]
                if hits:
                    kv.share(hits)
                    owned.append(hits)
            assert kv.num_free_blocks == kv.num_blocks - sum(1 for r in kv.ref_counts if r > 0), (
                step
            )
            kv.check_invariants()
        assert caching is False or kv.num_evictions > 0  # the eviction path ran


def test_extended_hashes_equal_the_hashes_of_the_grown_sequence():
    from infercast.sched.kv_cache import extend_block_hashes, hash_token_blocks

    ids = list(range(100, 137))
    hashes = list(hash_token_blocks(ids[:9], 4))
    assert len(hashes) == 2
    extend_block_hashes(hashes, ids, 4)
    assert hashes == list(hash_token_blocks(ids, 4)) and len(hashes) == 9


def test_only_indexed_blocks_are_counted_and_an_unindexed_tail_goes_straight_back():
    """Reference counts live on registered blocks only (the ones a hit can share); ``give``'s
    ``indexable`` says how many leading blocks may be registered, the rest return at once."""
    kv = BlockManager(num_blocks=8, block_size=4, enable_prefix_caching=True)
    table = kv.take(5)
    hashes = (101, 102)
    for b, h in zip(table, hashes, strict=False):
        kv.register(b, h)
    hits = kv.match_prefix(hashes, 2)
    kv.share(hits)  # a second request holds the two registered blocks
    assert [kv.ref_counts[b] for b in table] == [2, 2, 1, 1, 1]
    kv.give(table, indexable=len(hashes))
    assert [kv.ref_counts[b] for b in table] == [1, 1, 0, 0, 0]
    assert kv.num_free_blocks == 6 and kv.num_cached_free(hits) == 0
    kv.check_invariants()
    kv.give(hits, indexable=len(hits))
    assert kv.num_cached_free(hits) == 2 and kv.num_free_blocks == 8
    assert kv.take(3) == table[2:][::-1]  # the tail went back last block first (on top)
    kv.check_invariants()
