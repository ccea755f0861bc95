"""Small helpers for CPU-only scheduler tests (no clock, no cost model)."""

from __future__ import annotations

from infercast.sched import Request, Scheduler, SchedulerConfig


def make_scheduler(**kw) -> Scheduler:
    defaults = dict(
        policy="chunked", max_num_seqs=8, max_num_batched_tokens=64, block_size=4, num_blocks=64
    )
    defaults.update(kw)
    return Scheduler(SchedulerConfig(**defaults))


def req(i: int, prompt: int, output: int, hashes=()) -> Request:
    return Request(f"r{i}", prompt_tokens=prompt, max_output_tokens=output, block_hashes=hashes)


def check_step(s: Scheduler, batch) -> None:
    """Invariants that hold after every schedule(): budget, seats, KV accounting."""
    cfg = s.config
    assert batch.num_tokens <= cfg.max_num_batched_tokens or len(batch.seqs) == 1
    assert batch.num_seqs <= cfg.max_num_seqs
    assert len({q.request_id for q in batch.seqs}) == len(batch.seqs)
    s.check_invariants()
    for q in batch.seqs:
        r = s.requests[q.request_id]
        assert len(r.block_table) * cfg.block_size >= q.num_cached_tokens + q.num_new_tokens


def drive(
    s: Scheduler,
    max_steps: int = 100_000,
    use_fast_path: bool = False,
    finish_step: dict | None = None,
) -> tuple[list, int]:
    """Run to completion; return (finished requests in finish order, steps).

    ``finish_step``, when given, is filled with the step count at which each request finished
    (the order of requests finishing in the same step is not part of the scheduler's contract)."""
    finished = []
    steps = 0
    while s.has_unfinished and steps < max_steps:
        if use_fast_path:
            k = s.decode_horizon(7)
            if k:
                done = s.advance_decode(k)
                steps += k
                s.check_invariants()
                finished += _record(done, steps, finish_step)
                continue
        batch = s.schedule()
        check_step(s, batch)
        assert not batch.is_empty, "scheduler stalled with unfinished requests"
        steps += 1
        finished += _record(s.update(batch), steps, finish_step)
    return finished, steps


def _record(done: list, steps: int, finish_step: dict | None) -> list:
    if finish_step is not None:
        finish_step.update((r.request_id, steps) for r in done)
    return done


def finish_steps_both_paths(make, seed: int, n: int = 40) -> tuple[dict, dict]:
    """The step each of ``n`` random requests finished on, step by step and on the fast path:
    ``make(fast)`` builds the scheduler (``compact_decodes``/``emit_block_tables`` per path)."""
    import random

    results = []
    for fast in (False, True):
        rng = random.Random(seed)
        s = make(fast)
        for i in range(n):
            s.add_request(req(i, rng.randint(3, 40), rng.randint(2, 60)))
        finish: dict = {}
        drive(s, use_fast_path=fast, finish_step=finish)
        results.append(finish)
    return results[0], results[1]
