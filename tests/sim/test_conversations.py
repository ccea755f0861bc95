"""Multi-turn conversations in the simulator (sim/conversations.py), against hand calculations."""

from __future__ import annotations

import numpy as np
import pytest

from infercast.errors import ConfigError, DataError
from infercast.sim.config import build_config
from infercast.sim.conversations import (
    ConversationSpec,
    SessionSampler,
    load_sessions,
    session_prompts,
)
from infercast.sim.run import simulate


class _FlatTimer:
    """A step costs 1 ms plus 1 us per new token: simple, hardware-free."""

    kv_capacity_tokens = 1 << 20
    affine_context_limit = float("inf")

    def step_time_s(self, new, cached):
        return 1e-3 + 1e-6 * float(np.sum(new))

    def decode_affine(self, n):
        return 1e-3 + 1e-6 * n, 0.0


def _cfg(prefix_caching=True, **workload):
    wl = {
        "turns": 3,
        "input": {"mean": 40},
        "output": {"mean": 24},
        "think_time_s": 1.0,
        "num_requests": 2,
        **workload,
    }
    return build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "mode": "exact",
            "scheduler": {"prefix_caching": prefix_caching, "num_blocks": 4096, "block_size": 16},
            "workload": wl,
        }
    )


def test_two_sessions_of_three_turns_cache_exactly_the_hand_counted_tokens():
    # Messages of 40 tokens, answers of 24, blocks of 16. Turn k's prompt is the history H_k plus
    # 40: 40, 104, 168 (312 per session). A finished turn leaves its computed full blocks cached:
    # its prompt and answer minus the last sampled token (never computed), H_{k+1} - 1 tokens, so
    # turn k + 1 reuses 16 * floor((H_{k+1} - 1) / 16): turn 2: H = 64 -> 48; turn 3: H = 128
    # -> 112.
    records = []
    result = simulate(_cfg(), _FlatTimer(), sink=records.append)
    s = result.summary
    assert s.completed == 6
    assert sorted(r.cached_prompt_tokens for r in records) == [0, 0, 48, 48, 112, 112]
    assert s.cached_prompt_tokens == 2 * (48 + 112)
    assert s.total_input_tokens == 2 * (40 + 104 + 168)
    assert s.prefix_hit_rate_tokens == pytest.approx(320 / 624)
    assert s.prefix_hit_rate_requests == pytest.approx(4 / 6)
    assert result.extra["conversation_turns"] == 6
    assert result.blocks_in_use_at_end == 0


def test_without_prefix_caching_every_turn_recomputes_its_history():
    s = simulate(_cfg(prefix_caching=False), _FlatTimer()).summary
    assert s.total_input_tokens == 624
    assert s.prefix_hit_rate_tokens == 0.0 and s.prefix_hit_rate_requests == 0.0


def test_fast_and_exact_modes_count_the_same_hits():
    fast = build_config({**_cfg().model_dump(), "mode": "fast"})
    a = simulate(_cfg(), _FlatTimer()).summary
    b = simulate(fast, _FlatTimer()).summary
    assert (a.cached_prompt_tokens, a.prefix_hit_requests) == (
        b.cached_prompt_tokens,
        b.prefix_hit_requests,
    )


def test_next_turn_is_sent_think_time_after_the_previous_answer():
    records = []
    simulate(_cfg(num_requests=1, think_time_s=2.5), _FlatTimer(), sink=records.append)
    records.sort(key=lambda r: r.arrival_s)
    for prev, nxt in zip(records, records[1:], strict=False):
        assert nxt.arrival_s == pytest.approx(prev.chunk_times_s[-1] + 2.5)
    assert [r.prompt_tokens for r in records] == [40, 104, 168]


def test_closed_loop_users_run_sessions_back_to_back():
    records = []
    r = simulate(_cfg(num_requests=4, concurrency=2), _FlatTimer(), sink=records.append)
    assert r.summary.completed == 12 and r.extra["conversation_sessions"] == 4


def test_session_prompts_are_the_history_plus_the_new_message():
    assert session_prompts([(10, 5, 0.0), (3, 7, 1.0), (2, 1, 1.0)]) == [(10, 5), (18, 7), (27, 1)]


def test_sessions_end_at_the_context_limit():
    spec = ConversationSpec(
        "synthetic",
        turns=5,
        think_time_s=0.0,
        input_dist="fixed",
        input_mean=40,
        output_dist="fixed",
        output_mean=24,
        max_model_len=200,
    )
    turns = SessionSampler(spec, np.random.default_rng(0)).session()
    assert len(turns) == 3  # 64 + 64 + 64 = 192 <= 200; a fourth turn would need 256


def test_builtin_sessions_are_the_chained_mooncake_trace():
    t = load_sessions("builtin")
    assert (
        t.num_sessions == 8056 and t.new_tokens.size == 11977
    )  # benchmarks/derive_conversation_sessions.py
    assert t.turns_per_session().mean() == pytest.approx(1.487, abs=1e-3)
    assert (t.gap_s[t.start[:-1]] == 0).all()


def test_builtin_with_turns_draws_follow_ups():
    spec = ConversationSpec("builtin", turns=4, think_time_s=3.0)
    s = SessionSampler(spec, np.random.default_rng(1)).session()
    assert len(s) == 4 and s[0][2] == 0.0 and all(t[2] == 3.0 for t in s[1:])


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="synthetic conversations need"):
        build_config({"workload": {"turns": 3}})
    with pytest.raises(ConfigError, match="drop `trace`"):
        build_config({"workload": {"conversations": "builtin", "trace": "azure-conv"}})
    bad = tmp_path / "s.csv"
    bad.write_text("session,turn\n1,1\n")
    with pytest.raises(DataError, match="missing columns"):
        load_sessions(str(bad))
    with pytest.raises(ConfigError, match="not 'builtin'"):
        load_sessions(str(tmp_path / "none.csv"))


def test_engine_measures_the_hit_rates_the_simulator_predicts(tmp_path):
    # The CPU engine (tiny random model, real KV and prefix cache) serves 3 sessions x 3 turns,
    # two sessions at a time; each next prompt is the previous prompt + the engine's answer + a
    # new message. The simulator replays the same sessions with the same scheduler settings.
    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.loader import load
    from infercast.engine.sampling import SamplingParams

    class Clock:
        def __call__(self):
            return 0.0

    bs = 4
    eng = Engine(
        load("tiny", seed=5),
        EngineConfig(
            max_num_batched_tokens=32,
            block_size=bs,
            kv_cache_bytes=4e6,
            enable_prefix_caching=True,
            max_num_seqs=4,
        ),
        Clock(),
        np.random.default_rng(0),
    )
    rng = np.random.default_rng(3)
    plan = {
        s: [(int(rng.integers(5, 14)), int(rng.integers(3, 9))) for _ in range(3)] for s in range(3)
    }
    rows, prompts = [], {}
    for group in ([0, 1], [2]):
        for k in range(3):
            for s in group:
                new, out = plan[s][k]
                prompts[s] = prompts.get(s, []) + rng.integers(0, 200, new).tolist()
                eng.add(
                    f"{s}-{k}",
                    prompts[s],
                    SamplingParams(max_tokens=out, temperature=0.0, ignore_eos=True),
                )
            answers: dict[str, list[int]] = {}
            while eng.has_unfinished:
                for ev in eng.step():
                    if ev.token_id is not None:
                        answers.setdefault(ev.request_id, []).append(ev.token_id)
            for s in group:
                prompts[s] = prompts[s] + answers[f"{s}-{k}"]
                rows.append(f"{s},{k + 1},{k},{plan[s][k][0]},{plan[s][k][1]},0")
    measured = {r.request_id: r.cached_prompt_tokens for r in eng.finished}
    f = tmp_path / "sessions.csv"
    f.write_text(
        "session,turn,arrival_s,new_input_tokens,output_tokens,think_s\n" + "\n".join(rows)
    )
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "mode": "exact",
            "scheduler": {
                "prefix_caching": True,
                "num_blocks": 4096,
                "block_size": bs,
                "max_num_batched_tokens": 32,
                "max_num_seqs": 4,
            },
            "workload": {"conversations": str(f), "num_requests": 3, "concurrency": 2},
        }
    )
    predicted = simulate(cfg, _FlatTimer()).summary
    total_prompt = sum(
        sum(n for n, _ in plan[s][: k + 1]) + sum(o for _, o in plan[s][:k])
        for s in plan
        for k in range(3)
    )
    assert predicted.total_input_tokens == total_prompt
    assert predicted.cached_prompt_tokens == sum(measured.values())
    assert predicted.prefix_hit_requests == sum(1 for v in measured.values() if v > 0) == 6


def test_a_shared_system_prompt_is_cached_across_sessions():
    # 20 shared tokens = one full block of 16 shared by both sessions: the second session's
    # first turn reuses it (the first's was computed first: sessions start one after the other
    # in a closed loop of one user); follow-ups as in the hand count above.
    records = []
    s = simulate(
        _cfg(concurrency=1, prefix_groups=1, prefix_tokens=20), _FlatTimer(), sink=records.append
    ).summary
    assert sorted(r.cached_prompt_tokens for r in records) == [0, 16, 48, 48, 112, 112]
    assert s.prefix_hit_rate_requests == pytest.approx(5 / 6)
