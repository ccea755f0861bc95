"""The fleet's heap router picks what a scan of every serving replica picks."""

import random

from infercast.fleet.router import LeastLoaded


def _scan(keys: dict[int, float]) -> int | None:
    """The rule by brute force: least key, ties to the lowest index."""
    return min(keys, key=lambda i: (keys[i], i)) if keys else None


def test_heap_picks_the_scans_replica_through_random_changes():
    rng = random.Random(7)
    router, keys = LeastLoaded(), {}
    for _ in range(20_000):
        op = rng.random()
        i = rng.randrange(40)
        if op < 0.7:
            keys[i] = float(rng.randrange(0, 6))  # few distinct loads: many ties
            router.update(i, keys[i])
        elif op < 0.85:
            keys.pop(i, None)
            router.remove(i)
        assert router.best() == _scan(keys)
        assert len(router) == len(keys)


def test_stale_entries_do_not_pile_up():
    router = LeastLoaded()
    for step in range(10_000):
        router.update(step % 3, float(step))
    assert len(router._heap) <= 2 * 3 + 64


def test_no_serving_replica_is_none():
    router = LeastLoaded()
    assert router.best() is None
    router.update(2, 5.0)
    router.remove(2)
    assert router.best() is None
