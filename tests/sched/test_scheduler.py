"""Scheduler policies, preemption, prefix caching, abort and the decode fast path."""

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infercast.errors import ConfigError
from infercast.sched import RequestStatus, SchedulerConfig, synthetic_block_hashes

from .helpers import check_step, drive, finish_steps_both_paths, make_scheduler, req


def test_single_request_prefill_then_decodes():
    s = make_scheduler()
    s.add_request(req(0, 10, 3))
    b = s.schedule()
    assert [(q.num_new_tokens, q.num_cached_tokens, q.samples) for q in b.seqs] == [(10, 0, True)]
    assert len(b.seqs[0].block_table) == 3
    s.update(b)
    b = s.schedule()
    assert [(q.num_new_tokens, q.num_cached_tokens) for q in b.seqs] == [(1, 10)]
    s.update(b)
    done = s.update(s.schedule())
    assert [r.request_id for r in done] == ["r0"] and done[0].num_output_tokens == 3
    assert s.kv.num_free_blocks == 64 and not s.has_unfinished


def test_chunked_splits_long_prompt_and_puts_decodes_first():
    s = make_scheduler(max_num_batched_tokens=16)
    s.add_request(req(0, 4, 5))
    s.update(s.schedule())  # r0 prefilled, now decoding
    s.add_request(req(1, 40, 2))
    b = s.schedule()
    assert [(q.request_id, q.num_new_tokens, q.samples) for q in b.seqs] == [
        ("r0", 1, True),
        ("r1", 15, False),
    ]
    s.update(b)
    b = s.schedule()
    assert [(q.request_id, q.num_new_tokens, q.num_cached_tokens) for q in b.seqs] == [
        ("r0", 1, 5),
        ("r1", 15, 15),
    ]


def test_continuous_runs_prefill_only_steps():
    s = make_scheduler(policy="continuous")
    s.add_request(req(0, 4, 5))
    s.update(s.schedule())
    s.add_request(req(1, 8, 2))
    b = s.schedule()
    assert [q.request_id for q in b.seqs] == ["r1"]  # decodes wait one step
    s.update(b)
    assert [q.request_id for q in s.schedule().seqs] == ["r0", "r1"]


def test_prefill_first_chunks_prompts_and_pauses_decodes():
    """SGLang's default: a prefill batch (chunked to the budget) whenever one can be formed,
    the running requests decode only in steps without one (sched/policies.py cites it)."""
    s = make_scheduler(policy="prefill-first", max_num_batched_tokens=16)
    s.add_request(req(0, 4, 5))
    s.update(s.schedule())  # r0 prefilled, now decoding
    s.add_request(req(1, 40, 2))
    steps = []
    for _ in range(4):
        b = s.schedule()
        steps.append([(q.request_id, q.num_new_tokens) for q in b.seqs])
        s.update(b)
    assert steps == [[("r1", 16)], [("r1", 16)], [("r1", 8)], [("r0", 1), ("r1", 1)]]


def test_static_waits_for_whole_batch():
    s = make_scheduler(policy="static", max_num_seqs=2)
    for i, out in enumerate((2, 6, 3)):
        s.add_request(req(i, 4, out))
    sizes = []
    while s.has_unfinished:
        b = s.schedule()
        sizes.append(b.num_seqs)
        s.update(b)
    # batch {r0, r1}: prefill, 5 decodes (r0 leaves after 1); then r2 alone
    assert sizes == [2, 2, 1, 1, 1, 1, 1, 1, 1]


def test_preemption_happens_and_everything_completes():
    s = make_scheduler(policy="chunked", num_blocks=12, block_size=4, max_num_batched_tokens=64)
    for i in range(4):
        s.add_request(req(i, 8, 12))  # each needs 5 blocks at the end; 4 * 5 > 12
    done, _ = drive(s)
    assert s.num_preemptions > 0
    assert sorted(r.request_id for r in done) == ["r0", "r1", "r2", "r3"]
    assert all(r.num_output_tokens == 12 for r in done)
    assert s.kv.num_free_blocks == 12


def test_prefix_cache_hit_skips_shared_blocks():
    s = make_scheduler(enable_prefix_caching=True, block_size=4)
    h = synthetic_block_hashes(0, 12, 4)
    s.add_request(req(0, 14, 1, h))
    s.update(s.schedule())
    s.add_request(req(1, 14, 1, h))
    b = s.schedule()
    assert [(q.num_new_tokens, q.num_cached_tokens) for q in b.seqs] == [(2, 12)]
    assert s.requests["r1"].num_cached_prompt_tokens == 12


def test_rejects_what_can_never_fit_and_bad_config():
    s = make_scheduler(num_blocks=4, block_size=4)
    r = req(0, 20, 5)
    assert not s.add_request(r) and r.status is RequestStatus.REJECTED
    assert "KV blocks" in r.reject_reason and "(" in r.reject_reason
    with pytest.raises(ConfigError, match="policy"):
        SchedulerConfig(policy="fifo")
    with pytest.raises(ConfigError, match="max_num_batched_tokens"):
        SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=32)


def test_abort_frees_blocks():
    s = make_scheduler()
    s.add_request(req(0, 10, 5))
    s.add_request(req(1, 10, 5))
    s.update(s.schedule())
    assert s.abort("r0").finish_reason == "abort"
    assert s.abort("r1").finish_reason == "abort"
    assert s.kv.num_free_blocks == 64 and not s.has_unfinished


workloads = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 30)), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
# Found by hypothesis: r3 and r4 finish in the same step after preemptions, reported in different
# orders.
@example([(1, 15), (1, 16), (1, 17), (1, 18), (1, 16), (1, 10)], "continuous", 16, False, True)
@given(
    workloads,
    st.sampled_from(["static", "continuous", "chunked", "prefill-first"]),
    st.integers(8, 40),
    st.booleans(),
    st.booleans(),
)
def test_invariants_on_random_workloads(lengths, policy, num_blocks, prefix, fast):
    """Every request completes or is rejected; KV never leaks; budget respected; fast == slow."""
    s = make_scheduler(
        policy=policy,
        num_blocks=num_blocks,
        enable_prefix_caching=prefix,
        max_num_batched_tokens=48,
    )
    accepted = set()
    for i, (p, o) in enumerate(lengths):
        r = req(i, p, o, synthetic_block_hashes(i % 2, 12, 4) if prefix else ())
        if s.add_request(r):
            accepted.add(r.request_id)
        else:
            assert r.reject_reason
    when: dict[str, int] = {}
    done, steps = drive(s, use_fast_path=fast, finish_step=when)
    assert {r.request_id for r in done} == accepted
    assert all(r.num_output_tokens == r.max_output_tokens for r in done)
    assert s.kv.num_free_blocks == num_blocks
    s.kv.check_invariants()
    if fast:  # same number of model steps as the one-by-one reference
        s2 = make_scheduler(
            policy=policy,
            num_blocks=num_blocks,
            enable_prefix_caching=prefix,
            max_num_batched_tokens=48,
        )
        for i, (p, o) in enumerate(lengths):
            s2.add_request(req(i, p, o, synthetic_block_hashes(i % 2, 12, 4) if prefix else ()))
        when2: dict[str, int] = {}
        done2, steps2 = drive(s2, finish_step=when2)
        assert steps2 == steps
        # Every request finishes at the same step (the order within one step is not part of the
        # contract: a multi-step advance reports in running order, a single update in its own
        # removal order).
        assert when2 == when


def test_check_step_helper_catches_a_leak():
    s = make_scheduler(enable_prefix_caching=True)
    s.add_request(req(0, 10, 5))
    b = s.schedule()
    s.kv.take(1)  # corrupt on purpose: a block leaves the pool, held by no request
    with pytest.raises(AssertionError, match="ref counts"):
        check_step(s, b)


def _trace_steps(s, use_fast_path=False):
    """Per step: (seqs, tokens, preempted) until done; fast-path segments expand to k steps."""
    out = []
    while s.has_unfinished:
        k = s.decode_horizon(5) if use_fast_path else 0
        if k:
            n = s.num_running
            out += [(n, n, 0)] * k
            s.advance_decode(k)
            continue
        b = s.schedule()
        assert not b.is_empty
        out.append((b.num_seqs, b.num_tokens, len(b.preempted)))
        s.update(b)
    return out


@settings(max_examples=30, deadline=None)
@given(
    workloads,
    st.sampled_from(["static", "continuous", "chunked", "prefill-first"]),
    st.integers(8, 40),
    st.booleans(),
)
def test_compact_decode_group_matches_listed_batches(lengths, policy, num_blocks, prefix):
    """The simulator's compact batches run the same steps as the engine's listed ones."""
    runs = []
    for compact, fast in ((False, False), (True, False), (True, True)):
        s = make_scheduler(
            policy=policy,
            num_blocks=num_blocks,
            enable_prefix_caching=prefix,
            max_num_batched_tokens=48,
            compact_decodes=compact,
        )
        for i, (p, o) in enumerate(lengths):
            s.add_request(req(i, p, o, synthetic_block_hashes(i % 2, 12, 4) if prefix else ()))
        runs.append(_trace_steps(s, fast))
        s.check_invariants()
        assert s.kv.num_free_blocks == num_blocks
    assert runs[0] == runs[1] == runs[2]


def test_engine_mode_lists_group_members_with_their_write_block():
    s = make_scheduler(block_size=4)
    s.add_request(req(0, 4, 6))
    s.update(s.schedule())  # prefilled 4 tokens: 1 block, the next write (pos 4) needs a 2nd
    b = s.schedule()
    (q,) = b.seqs
    assert (q.num_new_tokens, q.num_cached_tokens, len(q.block_table)) == (1, 4, 2)


def test_update_takes_counts_or_token_ids_and_stops():
    s = make_scheduler()
    s.add_request(req(0, 4, 10))
    s.add_request(req(1, 4, 10))
    s.update(s.schedule())
    b = s.schedule()
    s.update(b, {"r0": [11, 12, 13]}, finished={"r1"})  # r0: 3 tokens (speculative), r1 hits EOS
    r0 = s.requests["r0"]
    assert r0.num_output_tokens == 4 and "r1" not in s.requests
    b = s.schedule()
    assert [(q.num_new_tokens, q.num_cached_tokens) for q in b.seqs] == [(3, 5)]
    s.check_invariants()


def _plain_chunked_trace(lengths, num_blocks, plain: bool):
    """Every batch and decode horizon of a chunked run with requests arriving one per step."""
    s = make_scheduler(
        num_blocks=num_blocks,
        max_num_batched_tokens=48,
        compact_decodes=True,
        emit_block_tables=False,
    )
    assert s._plain_chunked
    s._plain_chunked = plain  # False: the policy's general path, the reference
    out, pending = [], [req(i, p, o) for i, (p, o) in enumerate(lengths)]
    while pending or s.has_unfinished:
        if pending:
            s.add_request(pending.pop(0))
        out.append(("horizon", s.decode_horizon(5)))
        b = s.schedule()
        seqs = tuple(dataclasses.replace(q) for q in b.seqs)  # copies: the fast path refills them
        out.append((seqs, b.preempted, b.num_decode_seqs, b.decode_cached_tokens))
        out.append([r.request_id for r in s.update(b)])
    s.check_invariants()
    assert s.kv.num_free_blocks == num_blocks
    return out


@settings(max_examples=40, deadline=None)
@given(workloads, st.integers(8, 40))
def test_plain_chunked_fast_path_equals_the_policy(lengths, num_blocks):
    """The simulator's chunked shortcut (group only, no prefix caching) decides as ChunkedPolicy."""
    assert _plain_chunked_trace(lengths, num_blocks, True) == _plain_chunked_trace(
        lengths, num_blocks, False
    )


def test_max_prefill_tokens_admits_after_the_first_prompt_only_below_the_cap_left():
    # SGLang PrefillAdder (schedule_policy.py): rem_input_tokens = max_prefill_tokens less the
    # running decodes under --enable-mixed-chunk, less each prompt admitted; add_one_req stops at
    # a later request whose prompt is >= what is left, and never stops the first
    s = make_scheduler(max_num_batched_tokens=64, max_prefill_tokens=30)
    for i in range(3):
        s.add_request(req(i, 12, 5))
    batch = s.schedule()
    assert [q.request_id for q in batch.seqs] == ["r0", "r1"]  # 12 < 30, 12 < 18, 12 >= 6
    mixed = make_scheduler(max_num_batched_tokens=64, max_prefill_tokens=26)
    for i in range(2):
        mixed.add_request(req(i, 12, 5))
    mixed.update(mixed.schedule())  # r0, r1 prefilled: 2 decodes from now on
    for i in (2, 3):
        mixed.add_request(req(i, 12, 5))
    ids = {q.request_id for q in mixed.schedule().seqs}
    assert "r2" in ids and "r3" not in ids  # 26 - 2 decodes - 12 = 12 left: 12 >= 12 stops r3
    alone = make_scheduler(max_num_batched_tokens=64, max_prefill_tokens=10)
    alone.add_request(req(0, 40, 5))
    alone.add_request(req(1, 2, 5))
    assert [q.request_id for q in alone.schedule().seqs] == ["r0"]  # the first goes past the cap


def test_max_prefill_tokens_under_ignore_eos_stops_only_once_spent():
    # schedule_policy.py add_one_req_ignore_eos (v0.5.9) checks no rem_input_tokens before a
    # request; it returns budget_state(), OTHER once rem_input_tokens <= 0, after adding one
    def first_step(cap):
        s = make_scheduler(
            policy="prefill-first",
            block_size=1,
            num_blocks=1000,
            max_num_batched_tokens=64,
            max_prefill_tokens=cap,
            admission="sglang-ignore-eos",
        )
        for i in range(3):
            s.add_request(req(i, 12, 5))
        return [q.request_id for q in s.schedule().seqs]

    assert first_step(13) == ["r0", "r1"]  # 1 left after r0: r1 starts (new-token-ratio: not)
    assert first_step(12) == ["r0"]  # spent by r0
    assert first_step(25) == ["r0", "r1", "r2"]


@pytest.mark.parametrize(
    "admission", ["current-use", "sglang-new-token-ratio", "sglang-ignore-eos"]
)
def test_max_prefill_tokens_same_on_fast_and_general_paths(admission):
    def make(fast):
        return make_scheduler(
            num_blocks=400,
            max_num_seqs=32,
            max_prefill_tokens=40,
            admission=admission,
            compact_decodes=fast,
            emit_block_tables=not fast,
        )

    step, fast = finish_steps_both_paths(make, seed=7)
    assert len(step) == 40 and step == fast
