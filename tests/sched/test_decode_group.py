"""The decode group's preemption without dissolving (``DecodeGroupMixin.shed_group``)."""

from __future__ import annotations

import random

import pytest
from tests.sched.helpers import check_step, make_scheduler, req

from infercast.sched.decode_group import DecodeGroupMixin


def _trace(policy: str, compact: bool, shed: bool, monkeypatch, seed: int) -> tuple[list, int]:
    """Every step's (preempted ids, scheduled ids and tokens, group size, cached context, finished
    ids) on a KV-scarce scheduler, with group shedding on or forced off (the per-request path), and
    how often the group shed and dissolved."""
    if not shed:
        monkeypatch.setattr(DecodeGroupMixin, "can_shed", property(lambda self: False))
    calls = []  # (shed_group calls, dissolve_group calls) that preempted or dissolved
    for name in ("shed_group", "dissolve_group"):
        orig = getattr(DecodeGroupMixin, name)

        def spy(self, *a, _orig=orig, _name=name):
            calls.append(_name)
            return _orig(self, *a)

        monkeypatch.setattr(DecodeGroupMixin, name, spy)
    rng = random.Random(seed)
    s = make_scheduler(
        policy=policy,
        max_num_seqs=24,
        max_num_batched_tokens=96,
        num_blocks=60,
        emit_block_tables=False,  # the simulator's settings (tables: the engine's, never shed)
        compact_decodes=compact,
    )
    pending = [req(i, rng.randint(3, 40), rng.randint(5, 60)) for i in range(80)]
    steps = []
    for _ in range(5000):
        if pending and rng.random() < 0.3:
            s.add_request(pending.pop(0))
        if not s.has_unfinished:
            if not pending:
                break
            continue
        batch = s.schedule()
        check_step(s, batch)
        done = s.update(batch)
        steps.append(
            (
                batch.preempted,
                sorted(
                    (q.request_id, q.num_new_tokens) for q in batch.seqs if q.num_new_tokens > 1
                ),
                batch.num_decode_seqs + sum(1 for q in batch.seqs if q.num_new_tokens == 1),
                batch.decode_cached_tokens
                + sum(q.num_cached_tokens for q in batch.seqs if q.num_new_tokens == 1),
                # which finish, not in what order: the order within a step is not part of the
                # scheduler's contract (tests/sched/helpers.drive), and the per-request path's
                # rejoins leave stale finish-heap entries that can pop a member out of join order
                sorted(r.request_id for r in done),
            )
        )
    assert not s.has_unfinished and not pending
    monkeypatch.undo()
    return steps, (calls.count("shed_group"), calls.count("dissolve_group"))


@pytest.mark.parametrize("policy", ["chunked", "continuous", "prefill-first"])
@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_shedding_preempts_as_the_per_request_path_does(policy, compact, seed, monkeypatch):
    shed, (n_shed, n_dissolved) = _trace(policy, compact, True, monkeypatch, seed)
    assert n_shed > 0  # the group took preemptions without dissolving
    per_request, (n_shed, n_dissolved) = _trace(policy, compact, False, monkeypatch, seed)
    assert n_shed == 0 and n_dissolved > 0  # forced off: the group dissolved each time
    assert shed == per_request  # same victims in the same order, same steps, same finishes


@pytest.mark.parametrize("caching", [False, True])
def test_group_kept_when_kv_short_only_if_it_can_shed(caching):
    s = make_scheduler(
        enable_prefix_caching=caching, num_blocks=12, emit_block_tables=False, compact_decodes=True
    )
    for i in range(4):
        s.add_request(req(i, 8, 40))
    for _ in range(40):  # prompts in, then decode until the group runs out of blocks
        batch = s.schedule()
        if batch.preempted:
            break
        s.update(batch)
    assert batch.preempted == ("r3",)  # the newest
    # without prefix caching the survivors step as the group; with it (block identity matters)
    # the group dissolved and they are listed one by one
    assert batch.num_decode_seqs == (0 if caching else 3)
    assert len(batch.seqs) == (3 if caching else 0)
