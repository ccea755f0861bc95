"""A built-in load driver: replay timed requests into an in-process engine.

It stands in for the HTTP load generator when the question is the engine and
its scheduler alone: requests are added when their scheduled arrival time has
passed (at the next step boundary, as a server's engine loop would see them),
and each record's ``arrival_s`` is the *scheduled* time, so time spent waiting
for the running step shows up in TTFT exactly as the simulator counts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infercast.engine.engine import Engine
from infercast.engine.sampling import SamplingParams
from infercast.metrics.records import RequestRecord


@dataclass(frozen=True)
class TimedRequest:
    """One request of a workload: when it arrives (s from start), its prompt and output length."""

    arrival_s: float
    prompt_ids: Sequence[int]
    output_tokens: int


def replay(
    engine: Engine, requests: Sequence[TimedRequest], sleep: Callable[[float], None] = time.sleep
) -> list[RequestRecord]:
    """Run ``requests`` through ``engine`` on its clock; returns the finished records.

    Outputs are forced to their length (greedy, EOS ignored), as a simulator
    replaying the same lengths assumes.
    """
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    t0 = engine.clock()
    nxt = 0
    while nxt < len(order) or engine.has_unfinished:
        now = engine.clock() - t0
        while nxt < len(order) and requests[order[nxt]].arrival_s <= now:
            req = requests[order[nxt]]
            params = SamplingParams(max_tokens=req.output_tokens, temperature=0.0, ignore_eos=True)
            engine.add(f"req-{order[nxt]}", list(req.prompt_ids), params, t0 + req.arrival_s)
            nxt += 1
        if engine.has_unfinished:
            engine.step()
        elif nxt < len(order):
            sleep(max(0.0, requests[order[nxt]].arrival_s - (engine.clock() - t0)))
    return sorted(engine.pop_finished(), key=lambda r: r.arrival_s)
