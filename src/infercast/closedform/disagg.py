"""Disaggregated serving (a prefill pool, a decode pool, a KV transfer between) in closed form.

The closed loop of ``C`` clients (fixed input ``I`` and output ``O``) over ``P``
prefill workers and ``D`` decode workers, as ``sim/disagg.py`` runs it: a prompt
is prefilled (chunked, ``T`` tokens per step, no decodes beside it), its KV
crosses the link in ``x`` seconds (``cost.comm.kv_transfer_time_s``), then a decode
worker streams its ``O`` tokens, the first one after one decode step. Each pool
is a queue; Little's law ties them together.

Decode side. ``n`` requests decoding over ``D`` workers, ``m = n / D`` each, a step
``t_d(m)`` (pure decode at the mean context ``I + O/2``, interpolated over a grid of
batch sizes timed once): a request stays ``O t_d`` there, so the request rate is
``X = n / (O t_d(m))`` and TPOT = ``t_d(m)``. At most ``M`` requests run per worker
(its engine's running limit and the KV that fits, as for aggregated rows).

Prefill side. Requests travel in cohorts: the clients start together, so a
prefill worker takes its ``C / P`` prompts in steps of ``g1 = min(g, C / P)``
(``g = min(R T // I, seats)`` over its ``R`` attention-DP ranks; one prompt's chunks when ``I > T``)
of ``t_1`` seconds each; a cohort then decodes in lockstep, finishes together and comes back as one,
``t_1`` after the cohort before it (the same pattern the simulator shows, and
:mod:`infercast.closedform.steady` uses for one replica). So a prompt's prefill
takes ``t_1`` and a worker is busy ``rho = (X / P) t_1 / g1``.

Closed loop: ``C = n + X (t_1 + x) + q``; ``n`` solves it by bisection (the left
side grows with ``n``) as long as ``rho < 1`` and ``n`` fits the decode seats
(``D M``); the ``q`` clients left over wait ``q / X`` (for a decode seat, or
for a prefill pool that runs at its full rate). Steady TTFT = ``t_1 + x + t_d + q / X``.

Wave one: all ``C`` prompts reach the prefill pool at t = 0 and queue in
``n_1 = ceil(C / (P g1))`` cohorts, so their mean TTFT is ``t_1 (n_1 + 1) / 2 +
x + t_d``; TTFT is the mean over ``W`` waves, the first one of them (as
:mod:`infercast.closedform.steady` does). Check: ``C = P = D = 1`` gives
TTFT = prefill + transfer + one decode step and TPOT = one batch-1 decode step.
Near a saturated prefill pool later waves partly collide, which this ignores
(up to ~12 % low TTFT in the tests); on the shipped rows with concurrency <= 512
it is within a median 0.7 % of the simulator (TTFT and TPOT).
``tests/closedform/test_disagg.py`` compares it with the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infercast.closedform.shape import Shape
from infercast.errors import Unpredictable

# Rows whose source gives no worker counts: in aiconfigurator's silicon sample (v0.12.0) those with
# silicon_data_source "source_file=2026-03-25.csv" / "2026-04-06.csv" are, by their Dynamo 0.8.1
# images and their concurrencies (4968, 10860, 2192, 896 ...), SemiAnalysis InferenceX runs, kept
# with the per-pool TP/EP but without num_workers, dp-attn or spec-decoding; InferenceX's configs
# (SemiAnalysisAI/InferenceX .github/configs/nvidia-master.yaml, e.g. dsr1-fp4-b200-dynamo-trt 1k/1k
# at concurrency 4968: 3 prefill TP4 + 4 decode DEP8 workers, MTP 1; at 10860: 3 + 5 DEP4, MTP 1)
# ran several workers a side, attention DP and MTP. One worker a side is then a guess, marked on the
# row: 207 of those 398 TPOT rows measure below the physics floor of a plain decode step at their
# concurrency on one decode worker (docs/history/validation.md, "Round 3: disaggregated").
UNSTATED_WORKERS_NOTE = (
    "worker counts not stated: 1 prefill + 1 decode worker assumed (the InferenceX runs "
    "behind such rows had several, attention DP and MTP)"
)


def pool_workers(
    prefill: dict, decode: dict, n_gpus: int, gpus: tuple[int, int]
) -> tuple[tuple[int, int], str | None]:
    """(prefill workers, decode workers) from ``extra``, and a note when they are assumed.

    Stated counts are used as given; without them, one of each when the two workers' GPUs
    add up to the row's ``n_gpus`` (marked: :data:`UNSTATED_WORKERS_NOTE`), else the row is
    not predicted.
    """
    pw, dw = prefill.get("num_workers"), decode.get("num_workers")
    if pw and dw:
        return (int(pw), int(dw)), None
    if n_gpus == sum(gpus):
        return (1, 1), UNSTATED_WORKERS_NOTE
    raise Unpredictable(
        f"the source does not say how many prefill and decode workers share its {n_gpus} GPUs"
    )


def decode_running_limit(limit: int, decode: dict, kv_fit: int) -> int:
    """A decode worker's running limit: the engine's default ``limit``, raised to the batch the
    deployment was sized for when ``extra.decode.batch_size`` states it (per attention-DP rank),
    never beyond the ``kv_fit`` sequences whose KV fits.

    Why: on every shipped row that states it, concurrency = num_workers x attention_dp_size x
    batch_size, and aiconfigurator's generator sizes the engine to it (TensorRT-LLM decode
    ``max_batch_size`` = max(512, 2 x batch_size) per rank, SGLang = batch_size:
    ai-dynamo/aiconfigurator src/aiconfigurator/generator/rule_plugin/{trtllm,sglang}.rule), where
    the engine defaults (2,048 / 4,096 per worker) would queue half of e.g. 32 ranks x 256.
    """
    try:
        batch = int(decode.get("batch_size") or 0) * max(
            int(decode.get("attention_dp_size") or 1), 1
        )
    except (TypeError, ValueError):
        return limit
    return max(limit, min(batch, kv_fit))


GRID_POINTS = 12  # decode batch sizes timed per row (log-spaced, interpolated linearly)
BISECTIONS = 48


@dataclass(frozen=True)
class DisaggLoop:
    """Shapes to time on each pool's worker, and the closed form that combines their times."""

    clients: int
    prefill_workers: int
    decode_workers: int
    output_tokens: int
    group: int  # g: prompts per prefill step
    wave_group: int  # g1: prompts per cohort (fewer than g when C / P < g)
    decode_limit: int  # M: requests running per decode worker
    batches: tuple[int, ...]  # decode grid
    transfer_s: float
    waves: float | None
    prefill_shapes: tuple[
        Shape, ...
    ]  # a cohort's prefill: one step of g1 prompts, or one prompt's chunks
    decode_shapes: tuple[Shape, ...]

    def metrics(self, prefill_times, decode_times) -> dict[str, float]:
        """ttft_s, tpot_s, request rate from the prefill and decode shapes' step times."""
        t_wave = sum(prefill_times)  # a cohort's prefill (g1 prompts, or the chunks of one)
        grid = np.asarray(self.batches, dtype=np.float64)
        td = np.asarray(list(decode_times), dtype=np.float64)
        o, p, d, c, g1 = (
            self.output_tokens,
            self.prefill_workers,
            self.decode_workers,
            self.clients,
            self.wave_group,
        )

        def state(n: float) -> tuple[float, float, float]:  # (clients accounted for, X, rho)
            x_rate = n / (o * float(np.interp(n / d, grid, td)))
            return n + x_rate * (t_wave + self.transfer_s), x_rate, x_rate / p * t_wave / g1

        seats = float(min(c, d * self.decode_limit))
        lo, hi = 0.0, seats
        for _ in range(BISECTIONS):
            mid = (lo + hi) / 2
            used, _, rho = state(mid)
            lo, hi = (mid, hi) if used <= c and rho < 1.0 else (lo, mid)
        n = max(lo, 1e-9)
        used, x_rate, _ = state(n)
        tpot = float(np.interp(n / d, grid, td))
        excess = max(c - used, 0.0)  # clients beyond the decode seats or the prefill pool's rate
        ttft = t_wave + self.transfer_s + tpot + excess / x_rate
        if (
            self.waves is not None
        ):  # wave one: the prompts queue; the excess waits one request's stay
            groups = math.ceil(c / (p * g1))
            first = t_wave * (groups + 1) / 2 + self.transfer_s + tpot + excess / c * o * tpot
            ttft = (first + (self.waves - 1) * ttft) / self.waves
        return {"ttft_s": ttft, "tpot_s": tpot, "requests_per_s": x_rate}


def _prefill(prompts: int, i: int, t: int) -> tuple[Shape, ...]:
    """One prefill step of ``prompts`` prompts, or the chunks of one prompt longer than the
    budget."""
    if prompts > 1 or i <= t:
        return (((prompts, i, 0),),)
    return tuple(((1, min(t, i - j * t), j * t),) for j in range(math.ceil(i / t)))


def prefill_seats(prefill: dict, ranks: int, default: int) -> int:
    """Prompts a prefill worker takes per step: ``extra.prefill.batch_size`` per attention-DP rank
    when stated (aiconfigurator's generator sets the prefill engine's ``max_batch_size`` to it:
    rule_plugin/trtllm.rule, sglang.rule; 1 on every shipped row), else the engine's ``default``."""
    try:
        batch = int(prefill.get("batch_size") or 0)
    except (TypeError, ValueError):
        batch = 0
    return batch * max(ranks, 1) if batch > 0 else default


def disagg_loop(
    clients: int,
    workers: tuple[int, int],
    input_tokens: int,
    output_tokens: int,
    budget_tokens: int,
    prefill_seats: int,
    decode_limit: int,
    transfer_s: float,
    waves: float | None = None,
    prefill_ranks: int = 1,
) -> DisaggLoop:
    """The disaggregated closed loop (module docstring for the symbols); ``prefill_ranks``:
    attention-DP ranks of a prefill worker, each with its own token budget (its own scheduler)."""
    i, o, t = int(input_tokens), max(int(output_tokens), 1), int(budget_tokens)
    p, d = workers
    g = max(1, min(t * max(prefill_ranks, 1) // i, prefill_seats))
    g1 = max(1, min(g, math.ceil(clients / p)))
    cap = max(1, min(decode_limit, math.ceil(clients / d)))
    batches = tuple(sorted({int(round(b)) for b in np.geomspace(1, cap, GRID_POINTS)} | {cap}))
    ctx = i + o // 2
    return DisaggLoop(
        clients,
        p,
        d,
        o,
        g,
        g1,
        max(1, decode_limit),
        batches,
        transfer_s,
        waves,
        _prefill(g1, i, t),
        tuple(((b, 1, ctx),) for b in batches),
    )
