"""Admission rules (``sched/admission.py``): TensorRT-LLM's GUARANTEED_NO_EVICT, SGLang's
new_token_ratio and its ``ignore_eos`` rule, as their sources state them."""

from __future__ import annotations

import pytest
from tests.sched.helpers import check_step, drive, finish_steps_both_paths, make_scheduler, req

from infercast.errors import ConfigError
from infercast.sched import SchedulerConfig
from infercast.sched.admission import NewTokenRatio


def _first_scheduled(s, requests, fast: bool) -> tuple[dict, dict]:
    """Run to completion; (step at which each request was first scheduled, finish step)."""
    started: dict = {}
    finished: dict = {}
    steps = 0
    while s.has_unfinished:
        if fast:
            k = s.decode_horizon(7)
            if k:
                steps += k
                finished.update((r.request_id, steps) for r in s.advance_decode(k))
                continue
        batch = s.schedule()
        check_step(s, batch)
        for q in batch.seqs:
            started.setdefault(q.request_id, steps)
        steps += 1
        finished.update((r.request_id, steps) for r in s.update(batch))
    return started, finished


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("policy", ["chunked", "prefill-first", "continuous"])
def test_reserve_full_output_admits_n_whole_sequences_and_never_preempts(policy, fast):
    # 8 + 8 tokens, the last never written: 15 tokens = 4 blocks of 4; 12 blocks hold 3 sequences
    s = make_scheduler(
        policy=policy, num_blocks=12, admission="reserve-full-output", compact_decodes=fast
    )
    for i in range(4):
        s.add_request(req(i, 8, 8))
    first = s.schedule()
    assert {q.request_id for q in first.seqs} == {"r0", "r1", "r2"}
    assert s.kv.num_free_blocks == 0
    s.update(first)
    started, finished = _first_scheduled(s, [], fast)
    assert started["r3"] == min(finished[r] for r in ("r0", "r1", "r2"))  # the step after
    assert s.num_preemptions == 0


def test_current_use_admits_more_and_preempts_where_reserve_does_not():
    # the same load under vLLM's rule: all four start (their prompts fit) and KV runs out
    s = make_scheduler(num_blocks=12)
    for i in range(4):
        s.add_request(req(i, 8, 8))
    assert len(s.schedule().seqs) == 4
    s2 = make_scheduler(num_blocks=12)
    for i in range(4):
        s2.add_request(req(i, 8, 8))
    drive(s2)
    assert s2.num_preemptions > 0


def test_reserve_full_output_same_on_fast_and_general_paths():
    runs = []
    for fast in (False, True):
        s = make_scheduler(
            num_blocks=40, admission="reserve-full-output", compact_decodes=True, max_num_seqs=8
        )
        s.config  # noqa: B018
        if not fast:
            s._plain_chunked = False  # the general path
        for i in range(12):
            s.add_request(req(i, 5 + 3 * i % 11, 4 + 5 * i % 13))
        runs.append(_first_scheduled(s, [], fast))
        assert s.num_preemptions == 0
    assert runs[0] == runs[1]


def test_new_token_ratio_init_decay_min_and_reset():
    cfg = SchedulerConfig(admission="sglang-new-token-ratio")
    r = NewTokenRatio(cfg)
    assert r.value == 0.7
    assert r.min == pytest.approx(0.7 * 0.14)
    assert r.decay == pytest.approx((0.7 - 0.098) / 600)
    r.steps = 300
    assert r.value == pytest.approx(0.7 - 300 * (0.7 - 0.098) / 600)
    r.steps = 600
    assert r.value == pytest.approx(0.098)
    r.steps = 5000
    assert r.value == pytest.approx(0.098)  # floored at min
    r.reset()
    assert r.value == 0.7


def test_new_token_ratio_decays_on_decode_steps_only():
    s = make_scheduler(
        policy="prefill-first", block_size=1, num_blocks=1000, admission="sglang-new-token-ratio"
    )
    s.add_request(req(0, 10, 50))
    b = s.schedule()  # the prefill
    s.update(b)
    assert s.ratio.steps == 0
    for n in range(1, 6):
        s.update(s.schedule())  # decodes
        assert s.ratio.steps == n
    s.add_request(req(1, 10, 5))
    b = s.schedule()  # r1's prefill: the ratio stays
    assert [q.request_id for q in b.seqs] == ["r1"]
    s.update(b)
    assert s.ratio.steps == 5


def test_new_token_ratio_retraction_sets_sglang_estimate():
    # KV too small for both outputs: a decode step must preempt (SGLang retracts)
    s = make_scheduler(
        policy="prefill-first",
        block_size=1,
        num_blocks=80,
        admission="sglang-new-token-ratio",
        new_token_ratio_init=0.01,  # admit both soon, so that KV runs out later
    )
    s.add_request(req(0, 10, 40))
    s.add_request(req(1, 10, 40))
    for _ in range(200):
        s.update(s.schedule())
        if s.num_preemptions:
            break
    assert s.num_preemptions
    kept = list(s.running.values())
    decoded = sum(r.num_output_tokens + (s.dstep - r.dbase if r.dbase >= 0 else 0) for r in kept)
    want = min(1.0, (decoded + 20 * len(kept)) / sum(r.max_output_tokens for r in kept))
    assert s.ratio.value == pytest.approx(want)


def test_new_token_ratio_resets_when_idle():
    s = make_scheduler(
        policy="prefill-first", block_size=1, num_blocks=1000, admission="sglang-new-token-ratio"
    )
    s.add_request(req(0, 10, 8))
    drive(s)
    assert s.ratio.steps > 0
    s.add_request(req(1, 10, 8))  # the engine was idle
    assert s.ratio.value == 0.7


def _decode_steps_before_r1_starts(s, fast: bool) -> int:
    """Decode steps (whole horizons on the fast path) until a scheduled batch holds r1."""
    steps = 0
    while True:
        if fast:
            k = s.decode_horizon(50)
            if k:
                s.advance_decode(k)
                steps += k
                continue
        b = s.schedule()
        if any(q.request_id == "r1" for q in b.seqs):
            return steps
        s.update(b)
        steps += 1


def _sglang_admission_step(fast: bool) -> tuple[int, list]:
    """r0 decodes; r1 waits until its prompt + output < free KV - ratio x r0's remaining output.
    Returns (the decode step r1 started after, the value of that condition per step)."""
    s = make_scheduler(
        policy="prefill-first",
        block_size=1,
        num_blocks=1200,
        max_num_batched_tokens=512,
        admission="sglang-new-token-ratio",
        compact_decodes=fast,
    )
    s.add_request(req(0, 20, 1000))
    s.update(s.schedule())  # r0's prefill (and first token)
    s.add_request(req(1, 30, 500))
    return _decode_steps_before_r1_starts(s, fast), s


@pytest.mark.parametrize("fast", [False, True])
def test_sglang_admission_stops_while_reserved_plus_new_exceeds_free(fast):
    steps, _ = _sglang_admission_step(fast)
    r = NewTokenRatio(SchedulerConfig(admission="sglang-new-token-ratio"))

    # by hand: after k decode steps r0 holds 20 + k tokens of KV and has 999 - k outputs to go;
    # SGLang's ratio has decayed k times
    def fits(k):
        free = 1200 - (20 + k)
        reserved = (999 - k) * max(0.7 - k * r.decay, r.min)
        return 30 + 500 < free - reserved

    expected = next(k for k in range(999) if fits(k))
    assert expected > 0  # it did have to wait
    assert steps == expected


def _ignore_eos_start(fast: bool, kv_tokens: int) -> int:
    """r0 (20 + 60 tokens) decodes; r1 (30 + 100) waits under ``add_one_req_ignore_eos``:
    the decode steps after r0's prefill before r1 starts."""
    s = make_scheduler(
        policy="prefill-first",
        block_size=1,
        num_blocks=kv_tokens,
        max_num_batched_tokens=512,
        admission="sglang-ignore-eos",
        compact_decodes=fast,
    )
    s.add_request(req(0, 20, 60))
    s.update(s.schedule())  # r0's prefill (and first token)
    s.add_request(req(1, 30, 100))
    steps = _decode_steps_before_r1_starts(s, fast)
    assert s.num_preemptions == 0
    return steps


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("kv_tokens", [150, 160, 200])
def test_sglang_ignore_eos_admits_when_every_request_can_finish_in_turn(fast, kv_tokens):
    # schedule_policy.py add_one_req_ignore_eos (v0.5.9), by hand: after k decode steps r0's KV
    # holds 20 + k tokens (its newest token is written by the next step) and it has 1 + k
    # outputs, 59 - k to go, so it finishes first: with r1's 30-token prompt taken, r0 needs
    # 59 - k tokens for each of the 2 running requests (> 1 each kept), then frees its
    # prompt + outputs (21 + k) and r1 needs its 100 (> 1 kept)
    def fits(k):
        rem = kv_tokens - (20 + k) - 30
        return rem - 2 * (59 - k) > 2 and rem + (21 + k) - 100 > 1

    expected = next(k for k in range(60) if fits(k))
    assert _ignore_eos_start(fast, kv_tokens) == expected
    assert expected == {150: 21, 160: 11, 200: 0}[kv_tokens]


def test_sglang_ignore_eos_orders_by_remaining_output():
    # r1's 10-token output finishes before r0's 39 to go: r1 goes first, its output counted for
    # both running requests, r0's once r1 has freed its 30 + 10; in r0-first order r1 would need
    # KV for 2 x 39. (A small new_token_ratio, so that the rule's first check, the prompt within
    # the free KV less the ratio's reserve, does not decide.)
    def starts_now(kv_tokens):
        s = make_scheduler(
            policy="prefill-first",
            block_size=1,
            num_blocks=kv_tokens,
            admission="sglang-ignore-eos",
            new_token_ratio_init=0.01,
        )
        s.add_request(req(0, 20, 40))
        s.update(s.schedule())
        assert s.num_running == 1  # r0 itself fits: kv - 20 - 40 > 1
        s.add_request(req(1, 30, 10))
        return [q.request_id for q in s.schedule().seqs] == ["r1"]

    # i=0 (r1: 10 left, 2 running): kv - 20 - 30 - 2 x 10 > 2 x 1
    # i=1 (r0: 39 left, 1 running): kv - 20 - 30 + 30 - 39 > 1
    need = max(20 + 30 + 20 + 2, 20 + 30 - 30 + 39 + 1) + 1
    assert need == 73
    assert starts_now(need) and not starts_now(need - 1)


def test_admission_rule_is_validated_by_name():
    with pytest.raises(ConfigError, match="`admission`"):
        SchedulerConfig(admission="greedy")


@pytest.mark.parametrize("clip", [4096, 9])  # 9: some remaining outputs are clipped
@pytest.mark.parametrize(
    "admission", ["sglang-new-token-ratio", "sglang-ignore-eos", "reserve-full-output"]
)
def test_fast_path_matches_step_by_step(admission, clip):
    import random

    results = []
    for fast in (False, True):
        rng = random.Random(7)
        s = make_scheduler(
            policy="prefill-first" if admission.startswith("sglang") else "chunked",
            block_size=1 if admission.startswith("sglang") else 4,
            num_blocks=300,
            max_num_seqs=16,
            admission=admission,
            clip_max_new_tokens=clip,
            compact_decodes=True,
            emit_block_tables=False,
        )
        for i in range(40):
            s.add_request(req(i, rng.randint(3, 40), rng.randint(2, 60)))
        finish: dict = {}
        drive(s, use_fast_path=fast, finish_step=finish)
        results.append((finish, s.num_preemptions))
    assert results[0] == results[1]


def _trtllm_scheduler(fast: bool = False, **rule):
    """TensorRT-LLM's admission (reserve the whole output) with one more rule."""
    return make_scheduler(
        num_blocks=400,
        max_num_seqs=64,
        admission="reserve-full-output",
        compact_decodes=fast,
        emit_block_tables=not fast,
        **rule,
    )


def _adp_scheduler(timeout: int, batching: int = 0, ranks: int = 2, fast: bool = False):
    return _trtllm_scheduler(
        fast, adp_ranks=ranks, adp_timeout_iters=timeout, adp_batching_wait_iters=batching
    )


def test_adp_balance_holds_a_lone_request_until_the_counter_reaches_the_timeout():
    # TensorRT-LLM PyExecutor._balance_adp_requests: while not every rank has a context request
    # the counter counts every iteration, decode-only ones included, and the contexts start when
    # it reaches timeout_iters (then it resets)
    s = _adp_scheduler(timeout=5)
    s.add_request(req(0, 4, 40))
    s.update(s.schedule())  # no decodes yet: a rank without generation requests starts it at once
    started = {}
    for step in range(1, 30):
        if step == 3:
            s.add_request(req(1, 4, 40))  # a lone request: 1 < 3 (2 ranks' coupon-collector mean)
        batch = s.schedule()
        for q in batch.seqs:
            started.setdefault(q.request_id, step)
        s.update(batch)
    assert started["r1"] == 5  # the counter's wrap (5 iterations after the first), not step 3


def test_adp_balance_starts_at_once_when_every_rank_has_a_request():
    s = _adp_scheduler(timeout=50)
    s.add_request(req(0, 4, 40))
    s.update(s.schedule())
    for i in (1, 2, 3):  # 2 ranks: 3 waiting = 2 (1 + 1/2) rounded up
        s.add_request(req(i, 4, 40))
    assert {q.request_id for q in s.schedule().seqs} >= {"r1", "r2", "r3"}


def test_adp_balance_waits_batching_iters_once_every_rank_has_a_request():
    s = _adp_scheduler(timeout=50, batching=3)
    s.add_request(req(0, 4, 40))
    s.update(s.schedule())
    for i in (1, 2, 3):
        s.add_request(req(i, 4, 40))
    waits = 0
    while True:
        batch = s.schedule()
        if "r1" in {q.request_id for q in batch.seqs}:
            break
        s.update(batch)
        waits += 1
    assert waits == 3


def test_adp_balance_off_by_default_and_validated():
    assert make_scheduler().hold is None
    with pytest.raises(ConfigError, match="`adp_ranks`"):
        SchedulerConfig(adp_ranks=0)


@pytest.mark.parametrize("batching", [0, 4])
def test_adp_balance_fast_path_matches_step_by_step(batching):
    step, fast = finish_steps_both_paths(
        lambda fast: _adp_scheduler(timeout=9, batching=batching, ranks=4, fast=fast), seed=3
    )
    assert len(step) == 40 and step == fast


def _wait_scheduler(timeout: int, ratio: float, fast: bool = False):
    return _trtllm_scheduler(
        fast, batch_wait_timeout_iters=timeout, batch_wait_max_tokens_ratio=ratio
    )


def test_batch_wait_holds_new_prompts_while_decodes_run_until_the_timeout():
    # TensorRT-LLM PyExecutor._waiting_requests: with generation requests running, new context
    # requests wait while their prompts plus the decodes stay under ratio x max_num_tokens,
    # counting each held iteration; at timeout_iters they go
    s = _wait_scheduler(timeout=6, ratio=0.8)
    s.add_request(req(0, 4, 40))
    s.update(s.schedule())  # no generation request yet: nothing waits
    started = {}
    for step in range(1, 30):
        if step == 3:
            s.add_request(req(1, 8, 40))  # 8 + 1 decode < 0.8 x 64
        batch = s.schedule()
        for q in batch.seqs:
            started.setdefault(q.request_id, step)
        s.update(batch)
    assert started["r1"] == 3 + 6


def test_batch_wait_releases_once_prompts_fill_the_token_share():
    s = _wait_scheduler(timeout=50, ratio=0.8)
    s.add_request(req(0, 4, 40))
    s.update(s.schedule())
    s.add_request(req(1, 20, 40))
    assert "r1" not in {q.request_id for q in s.schedule().seqs}  # 20 + 1 < 51.2: it waits
    s.add_request(req(2, 20, 40))
    assert "r2" not in {q.request_id for q in s.schedule().seqs}  # 40 + 1 < 51.2
    s.add_request(
        req(3, 50, 40)
    )  # past the 63 tokens the decode leaves: not scheduled, not counted
    assert "r2" not in {q.request_id for q in s.schedule().seqs}
    s2 = _wait_scheduler(timeout=50, ratio=0.8)
    s2.add_request(req(0, 4, 40))
    s2.update(s2.schedule())
    for i, prompt in ((1, 20), (2, 20), (3, 11)):  # 51 + 1 decode = 52 >= 51.2
        s2.add_request(req(i, prompt, 40))
    assert {q.request_id for q in s2.schedule().seqs} >= {"r1", "r2", "r3"}


def test_batch_wait_validated_and_not_with_attention_dp():
    with pytest.raises(ConfigError, match="`batch_wait_timeout_iters`"):
        SchedulerConfig(batch_wait_timeout_iters=-1)
    with pytest.raises(ConfigError, match="`adp_ranks` is 1"):
        SchedulerConfig(batch_wait_timeout_iters=40, adp_ranks=8)


def test_batch_wait_fast_path_matches_step_by_step():
    step, fast = finish_steps_both_paths(
        lambda fast: _wait_scheduler(timeout=9, ratio=0.8, fast=fast), seed=5
    )
    assert len(step) == 40 and step == fast
