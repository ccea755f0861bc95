"""A closed loop on one continuous-batching replica, in closed form (waves, then steady state).

Benchmarks at a fixed concurrency (and an engine running "offline" at its own
max batch) are closed loops: ``C`` clients, each sending its next request when
its last one finishes, fixed input ``I`` and output ``O`` lengths, chunked
prefill with ``T`` tokens per step, at most ``M = min(C, running limit)``
requests in the engine. The clients start together, so the first wave's
prompts queue behind each other; their successors then arrive in the groups in
which those prompts finished (one step's worth of prompts each), so later waves
see no such collision. The simulator shows exactly this pattern; this closed
form reproduces it with a handful of step times, cheap enough to calibrate on
(``tests/closedform/test_steady.py`` compares the two).

Symbols. Prompts are prefilled in groups of ``g = max(1, T // I)`` (one step's
budget); a group takes ``k = ceil(g I / T)`` steps; wave one has ``n = ceil(M /
g)`` groups. Each step also decodes ``d = M (O - 1) / S`` sequences at mean context
``I + O / 2``, where ``S = max(O - 1 + k, n k)`` steps make one request cycle.
``t0`` is a pure decode step of ``d`` sequences, ``t_j`` a step with chunk ``j``
of a group beside ``min(d, M - g)`` decoding sequences, ``own = sum_j t_j`` and
``delta = sum_j (t_j - t0)``:

    cycle R     = S t0 + n delta                  (every step, plus every group's prompts)
    TTFT wave 1 = own1 (n + 1) / 2                (the groups queue behind each other)
    TTFT later  = own + lag                       (groups arrive apart; real clients: spread, below)
    TTFT        = (wave 1 + (W - 1) later) / W + overhead   for W waves (W -> inf: steady state)
    TPOT        = (R - own) / (O - 1)
    throughput  = M O / R output tokens/s

``own1`` is ``own`` with the decoders wave one has beside a group: half the groups
before it on average (``g (n - 1) / 2``), at short contexts (``I + n k / 2``).
``lag`` (``arrival_lag``, benchmark rows only) is one mean step ``R / S``: a real
client's next request reaches the server (HTTP, tokenizer) after the engine has
launched the step that follows its predecessor's last token, so it waits for that
step; the simulator's clients arrive exactly at the step boundary (lag 0).

Real clients (``arrival_lag``) also do not stay in lockstep: a group that finished
together comes back over a few milliseconds of client and server jitter, and
nothing pulls requests that drifted into different steps back together (each
request's next arrival is its own prefill step plus ``O - 1`` steps later), so the
phases spread over the cycle within a few waves. A later prompt then shares its
prefill step only with the ``M / S`` others arriving in that step: ``own`` is timed
for ``gs = min(g, 1 + floor(M / S + 1/2))`` prompts beside ``min(d, M - gs)`` decoders
(``spread_steps``). The measurements require it: e.g. 16 clients of 1,024-token
prompts on Llama-3.1-70B (vLLM) measure a mean TTFT of 0.09-0.13 s, wave one
included, where one step of 8 such prompts (the lockstep ``own``) takes 0.2-0.27 s
in a cost model that matches the same rows' 4-prompt TTFT at concurrency 4.
The serving stack's per-request latency (HTTP, tokenization, hand-off to the
engine, first-token detokenization and streaming) is not an engine step: the
concurrency predictor adds the profile's ``request_overhead_s`` (fitted per engine
group by ``infercast calibrate``) to this TTFT. The cycle, TPOT and throughput
keep the lockstep form (the same prefill work per cycle).
Clients beyond ``M`` wait ``R (C / M - 1)`` in steady state (Little's law); in wave
one only the ``C - M`` beyond the limit wait, for one cycle: ``R (1 - M / C)`` on
average, mixed over the waves like TTFT.

Check: C = 1 gives TTFT = prefill time and TPOT = one decode step at batch 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infercast.closedform.shape import Shape


@dataclass(frozen=True)
class ClosedLoop:
    """Shapes to time and the bookkeeping that turns their times into TTFT/TPOT/throughput."""

    clients: float
    running: int  # M
    output_tokens: int
    group_steps: int  # k
    groups: int  # n
    steps: float  # S
    decoders: int  # d
    waves: float | None  # W; None = steady state
    shapes: tuple[
        Shape, ...
    ]  # [decode, decode + group chunk 1, ..., chunk k, (wave one: the same chunks)]
    wave_steps: int = 0  # trailing shapes: a group's chunks as wave one runs them
    arrival_lag: bool = (
        False  # a later request waits for the step in progress (a real client; not the simulator's)
    )
    spread_steps: int = (
        0  # shapes before the wave-one ones: a later request's own prefill when arrivals spread
    )

    def metrics(self, times) -> dict[str, float]:
        """ttft_s, tpot_s, output_tokens_per_s, request_latency_s from the shapes' step times."""
        t0 = times[0] if self.decoders else 0.0  # O = 1: no decoders
        cut = len(times) - self.wave_steps
        mid = cut - self.spread_steps
        mixed, first = list(times[1:mid]), sum(times[cut:])
        own, delta = sum(mixed), sum(t - t0 for t in mixed)
        n, o = self.groups, self.output_tokens
        cycle = self.steps * t0 + n * delta
        later = (sum(times[mid:cut]) if self.spread_steps else own) + (
            cycle / self.steps if self.arrival_lag else 0.0
        )
        ttft = later
        if self.waves is not None:
            ttft = ((first or own) * (n + 1) / 2 + (self.waves - 1) * later) / self.waves
        tpot = (cycle - own) / (o - 1) if o > 1 else math.nan
        wait = cycle * max(self.clients / self.running - 1.0, 0.0)  # Little's law, steady state
        if self.waves is not None:  # wave one: the clients beyond M wait one cycle, the rest none
            first_wait = cycle * max(1.0 - self.running / self.clients, 0.0)
            wait = (first_wait + (self.waves - 1) * wait) / self.waves
        return {
            "ttft_s": ttft + wait,
            "tpot_s": tpot,
            "output_tokens_per_s": self.running * o / cycle,
            "request_latency_s": cycle + wait,
        }


def closed_loop(
    clients: float,
    running_limit: int,
    input_tokens: int,
    output_tokens: int,
    budget_tokens: int,
    waves: float | None = None,
    arrival_lag: bool = False,
) -> ClosedLoop:
    """The closed loop of ``clients`` clients (module docstring for the symbols)."""
    i, o, t = int(input_tokens), max(int(output_tokens), 1), int(budget_tokens)
    m = max(1, min(int(math.ceil(clients)), running_limit))
    g = min(m, max(1, t // i))
    k = max(1, math.ceil(g * i / t))
    n = math.ceil(m / g)
    s = max(o - 1 + k, n * k)
    d = max(int(round(m * (o - 1) / s)), 0)
    ctx = i + o // 2
    shapes: list[Shape] = [((d, 1, ctx),) if d else ((1, 1, ctx),)]
    dm = min(d, m - g)  # while a group prefills, at most the other requests decode
    shapes += _group_steps(((dm, 1, ctx),) if dm > 0 else (), g, k, i, t)
    spread = ()
    if (
        arrival_lag and g > 1
    ):  # real clients: a later prompt shares its step with the ~m/s others arriving then
        gs = min(g, 1 + int(m / s + 0.5))
        ds = min(d, m - gs)
        spread = _group_steps(((ds, 1, ctx),) if ds > 0 else (), gs, k, i, t)
    wave = ()
    if (
        waves is not None and n > 1
    ):  # wave one: on average half the groups decode beside, at short contexts
        dw = min(m - g, g * (n - 1) // 2)
        wave = _group_steps(((dw, 1, i + n * k // 2),) if dw > 0 else (), g, k, i, t)
    return ClosedLoop(
        clients,
        m,
        o,
        k,
        n,
        s,
        d,
        waves,
        tuple(shapes) + spread + wave,
        len(wave),
        arrival_lag,
        len(spread),
    )


def _group_steps(beside: Shape, g: int, k: int, i: int, t: int) -> tuple[Shape, ...]:
    """The steps that prefill one group (``g`` prompts at once, or one prompt in ``k`` chunks)."""
    if g > 1:
        return (beside + ((g, i, 0),),)
    return tuple(beside + ((1, min(t, i - j * t), j * t),) for j in range(k))
