"""Speed and memory of ``infercast simulate`` (issue 3's goal, measured here, not in tests).

Workload of the goal: Llama-3.1-8B on one H100 SXM (bf16), Azure 2023 conversation
lengths, Poisson arrivals at 80 % of capacity, chunked scheduler (vLLM v1 defaults:
256 seqs, 8192 tokens per step). Capacity = request throughput of an offline run
(all requests at t=0) with the same lengths.

Run:
    python benchmarks/sim_speed.py                       # 50k requests, fast vs exact mode
    python benchmarks/sim_speed.py --num-requests 1000000 --no-exact   # the 1M-request goal
    python benchmarks/sim_speed.py --opcodes 20000  # bytecodes/calls per request (load-independent)
    PYTHONPATH=/tmp/base/src python benchmarks/sim_speed.py --fast-only   # one A/B sample of a tree

Reports process CPU seconds (not wall time: the machine is shared), requests per
CPU-second, the share of CPU spent inside the cost model (``StepModel.mixed_step_time_s``,
from a second run of at most 50k requests whose cost-model calls are timed),
the simulator's own rate with a constant-time stand-in cost model, and the peak
resident memory growth sampled during the run (memory must follow active requests).
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import time

from infercast.sim.config import build_config

try:
    from infercast.sim.presets import build_step_model
except ImportError:  # a tree from before the move (A/B runs against an old commit)
    from infercast.commands.simulate import build_step_model
from infercast.sim.run import simulate


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 1e6


class TimedModel:
    """Wraps the cost model to count the CPU time spent inside it."""

    def __init__(self, inner):
        self.inner, self.cpu_s, self.calls = inner, 0.0, 0
        self.kv_capacity_tokens = inner.kv_capacity_tokens
        self.affine_context_limit = inner.affine_context_limit

    def step_time_s(self, new, cached):
        t0 = time.process_time()
        out = self.inner.step_time_s(new, cached)
        self.cpu_s += time.process_time() - t0
        self.calls += 1
        return out

    def mixed_step_time_s(self, num_decode, decode_cached_sum, new, cached):
        t0 = time.process_time()
        out = self.inner.mixed_step_time_s(num_decode, decode_cached_sum, new, cached)
        self.cpu_s += time.process_time() - t0
        self.calls += 1
        return out

    def chunk_step_time_s(self, num_decode, decode_cached_sum, n, c):
        t0 = time.process_time()
        out = self.inner.chunk_step_time_s(num_decode, decode_cached_sum, n, c)
        self.cpu_s += time.process_time() - t0
        self.calls += 1
        return out

    def decode_affine(self, n):
        return self.inner.decode_affine(n)


class ConstantModel:
    """A constant-time stand-in (affine in tokens) to measure the simulator alone."""

    def __init__(self, inner):
        self.inner = inner
        self.kv_capacity_tokens = inner.kv_capacity_tokens
        self.affine_context_limit = float("inf")

    def step_time_s(self, new, cached):
        a, b = self.inner.decode_affine(1)
        return a + 2e-5 * float(sum(new)) + b * float(sum(cached))

    def mixed_step_time_s(self, num_decode, decode_cached_sum, new, cached):
        a, b = self.inner.decode_affine(1)
        return a + 2e-5 * float(num_decode + sum(new)) + b * float(decode_cached_sum + sum(cached))

    def decode_affine(self, n):
        return self.inner.decode_affine(n)


def config(num_requests: int, rate: float | None, mode: str = "fast"):
    wl = {"num_requests": num_requests, "trace": "azure-conv"}
    wl.update({"rate": rate} if rate else {"arrival": "offline"})
    return build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "mode": mode,
            "seed": 1,
            "scheduler": {"policy": "chunked"},
            "workload": wl,
        }
    )


def run(label: str, cfg, model, n: int) -> float:
    peak = [rss_mb()]
    base = peak[0]

    def progress(done: int) -> None:
        if done % 20000 == 0:
            peak[0] = max(peak[0], rss_mb())

    t0 = time.process_time()
    result = simulate(cfg, model, progress=progress)
    cpu = time.process_time() - t0
    rate = n / cpu
    s = result.summary
    print(
        f"{label}: {n:,} requests in {cpu:,.3f} CPU-s = {rate:,.0f} requests/CPU-s; "
        f"{result.num_steps:,} model steps, {result.num_segments:,} closed-form segments, "
        f"{result.num_events:,} events; RSS growth {peak[0] - base:,.0f} MB; "
        f"TTFT p50 {s.ttft.median * 1e3:.1f} ms, TPOT p50 {s.tpot.median * 1e3:.2f} ms, "
        f"mean batch {result.mean_batch_size:.0f}"
    )
    return cpu


def count_opcodes(cfg, model, n: int, top: int = 25) -> None:
    """Python bytecodes and calls per request of one run, per function (``sys.settrace`` with
    opcode events): a load-independent measure of the simulator's own work for A/B comparisons
    on a shared machine (the run is ~30x slower under the tracer; builtins and C work not
    counted)."""
    ops: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()

    def tracer(frame, event, _arg):
        key = (frame.f_code.co_name, frame.f_code.co_filename.rsplit("/", 1)[-1])
        if event == "call":
            calls[key] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            ops[key] += 1
        return tracer

    sys.settrace(tracer)
    try:
        simulate(cfg, model)
    finally:
        sys.settrace(None)
    print(
        f"opcode count, {n:,} requests: {sum(ops.values()) / n:,.0f} bytecodes and "
        f"{sum(calls.values()) / n:.1f} Python calls per request"
    )
    for key, v in ops.most_common(top):
        print(f"  {v / n:7.1f} bytecodes {calls[key] / n:5.2f} calls  {key[0]} ({key[1]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-requests", type=int, default=50_000)
    ap.add_argument("--no-exact", action="store_true", help="skip the exact-mode comparison")
    ap.add_argument(
        "--no-alone", action="store_true", help="skip the constant-time cost stand-in run"
    )
    ap.add_argument(
        "--fast-only",
        action="store_true",
        help="only the fast-mode run (A/B samples: alternate two trees via PYTHONPATH)",
    )
    ap.add_argument(
        "--opcodes",
        type=int,
        default=0,
        metavar="N",
        help="only count Python bytecodes per request over N requests (deterministic)",
    )
    args = ap.parse_args()
    n = args.num_requests
    model = build_step_model(config(1, None))
    cap = simulate(config(10_000, None), model).summary.request_throughput_rps
    rate = 0.8 * cap
    print(
        f"capacity (offline, 10k azure-conv requests): {cap:.2f} req/s -> Poisson at {rate:.2f} "
        "req/s"
    )
    simulate(config(2_000, rate), model)  # warm the cost model's caches, as a long run would
    if args.opcodes:
        count_opcodes(config(args.opcodes, rate), model, args.opcodes)
        return
    cpu = run("fast mode", config(n, rate), model, n)
    if args.fast_only:
        return
    # The cost model's share from a second, instrumented run (its clock reads would slow the first).
    m = min(n, 50_000)
    timed = TimedModel(model)
    timed_cpu = run("  same, cost model timed", config(m, rate), timed, m)
    print(
        f"  cost model: {timed.calls:,} calls, {timed.cpu_s:,.2f} CPU-s "
        f"({100 * timed.cpu_s / timed_cpu:.0f} % of that run, "
        f"{timed.cpu_s / max(timed.calls, 1) * 1e6:.0f} us/call; "
        f"~{timed.cpu_s / timed_cpu * cpu:,.1f} CPU-s of the fast-mode run)"
    )
    if not args.no_alone:
        run(
            "simulator alone (constant-time cost stand-in)",
            config(n, rate),
            ConstantModel(model),
            n,
        )
    if not args.no_exact:
        m = min(n, 20_000)
        exact = run("exact mode (one event per step)", config(m, rate, "exact"), model, m)
        fast = run("fast mode, same requests", config(m, rate), model, m)
        print(f"  fast path speed-up over exact mode: {exact / fast:.1f}x")


if __name__ == "__main__":
    main()
