"""Where a served step's time goes: the engine's forward against the rest of ``serve``.

Runs ``infercast serve``'s own code (``Engine``, ``create_app``, uvicorn) in this process
with counters around the engine thread's parts (``model.forward``, sampling, the
``Generation.append`` detokenize/stop step, the rest of ``Engine.step``: scheduler and
bookkeeping, and the metrics hook), drives it with ``infercast bench`` in a subprocess,
and prints per step and per streamed token the CPU and wall time of each part, every
thread's CPU time (``/proc/self/task``: the event loop's HTTP, SSE encode and uvicorn run
beside the engine thread and share its GIL), the served steps' trace, and TTFT and TPOT
means on a clock where each step lasts its CPU time (``cpu_clock_*``: what the run would
have measured with a core to itself, the check the simulator can be held to on a loaded
machine).

    PYTHONPATH=$PWD/src python benchmarks/serve_step_profile.py --weights int8 \\
        [--requests 16 --concurrency 4 --input-tokens 128 --output-tokens 64]

Not run by the tests (it needs the SmolLM2 package and takes ~20-60 s).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict


class Counter:
    """Wall and thread-CPU seconds and calls of one part."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.calls = 0

    def wrap(self, fn):
        def timed(*a, **kw):
            w0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                self.wall += time.perf_counter() - w0
                self.cpu += time.thread_time() - c0
                self.calls += 1

        return timed


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = defaultdict(float)
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            name = tid
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] += (int(fields[11]) + int(fields[12])) / tick
    return dict(out)


def cpu_clock_metrics(clock, members, arrivals) -> dict:
    """TTFT and TPOT means on a clock where each step lasts its engine-thread CPU time: the
    served run's own sequence of steps, without the waits for a core a loaded machine adds.

    A request arrives on that clock at the start of the first step that began after it
    arrived, less the part of the step under way then (scaled from wall to CPU time)."""
    import numpy as np

    if not clock:
        return {}
    start = np.array([c[0] for c in clock])
    end = np.array([c[1] for c in clock])
    cpu = np.array([c[2] for c in clock])
    vend = np.cumsum(cpu)
    vstart = vend - cpu
    first, last, count = {}, {}, defaultdict(int)
    for i, m in enumerate(members):
        for rid, sampled in m:
            if sampled:
                first.setdefault(rid, i)
                last[rid] = i
                count[rid] += 1
    ttft, tpot = [], []
    for rid, i0 in first.items():
        a = arrivals.get(rid)
        if a is None or a < start[0] - 1e-9:  # the bench's warm-up request, before the run
            continue
        k = int(np.searchsorted(start, a))  # the first step that began after it arrived
        va = vstart[min(k, len(vstart) - 1)]
        if k > 0 and a < end[k - 1]:  # arrived during step k-1: the rest of it, in CPU time
            frac = (end[k - 1] - a) / max(end[k - 1] - start[k - 1], 1e-12)
            va -= frac * cpu[k - 1]
        ttft.append(vend[i0] - va)
        if count[rid] > 1:
            tpot.append((vend[last[rid]] - vend[i0]) / (count[rid] - 1))
    return {
        "cpu_clock_requests": len(ttft),
        "cpu_clock_ttft_ms_mean": 1e3 * float(np.mean(ttft)) if ttft else None,
        "cpu_clock_tpot_ms_mean": 1e3 * float(np.mean(tpot)) if tpot else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--json", help="write the numbers here too")
    args = ap.parse_args()

    import numpy as np

    from infercast.engine import engine as engine_mod
    from infercast.engine import sequence
    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.loader import load

    parts = {k: Counter() for k in ("step", "forward", "sample", "append", "on_step")}
    loaded = load(args.model, seed=0, weights=args.weights)
    cfg = EngineConfig(max_num_seqs=args.max_num_seqs, num_threads=args.threads)
    engine_mod.sample = parts["sample"].wrap(engine_mod.sample)
    sequence.Generation.append = parts["append"].wrap(sequence.Generation.append)
    eng = Engine(loaded, cfg, time.monotonic, np.random.default_rng(0))
    fwd = parts["forward"].wrap(eng.model.forward)
    last: dict = {}

    def forward(*a, **kw):
        w0, c0 = parts["forward"].wall, parts["forward"].cpu
        out = fwd(*a, **kw)
        last.update(wall=parts["forward"].wall - w0, cpu=parts["forward"].cpu - c0)
        return out

    eng.model.forward = forward
    step = parts["step"].wrap(eng.step)
    starts: list[float] = []

    cpu_clock: list[tuple[float, float, float]] = []  # per step: monotonic start, end; CPU s

    def timed_step():
        last["tid"] = threading.get_native_id()
        starts.append(time.perf_counter())
        m0, c0 = time.monotonic(), time.thread_time()
        out = step()
        if ran["step"]:
            cpu_clock.append((m0, time.monotonic(), time.thread_time() - c0))
        ran["step"] = False
        return out

    eng.step = timed_step
    decode_steps = defaultdict(int)  # steps by number of sampled tokens
    per_step: list[tuple] = []  # (sampled, new tokens, forward wall, forward cpu, step start)

    arrived: dict[str, float] = {}  # request id -> its arrival (the server's monotonic clock)
    add = eng.add

    def timed_add(request_id, prompt_ids, params, arrival_s=None):
        arrived[request_id] = time.monotonic() if arrival_s is None else arrival_s
        return add(request_id, prompt_ids, params, arrival_s)

    eng.add = timed_add
    ran = {"step": False}
    members: list[tuple[tuple[str, bool], ...]] = []  # per step: (request id, sampled)

    def observe(batch, _s):
        ran["step"] = True
        members.append(tuple((s.request_id, s.samples) for s in batch.seqs))
        n = sum(1 for s in batch.seqs if s.samples)
        decode_steps[n] += 1
        new = sum(s.num_new_tokens for s in batch.seqs)
        per_step.append((n, new, last["wall"], last["cpu"], starts[-1]))

    eng.step_observer = observe

    from infercast.engine.server import create_app

    app = create_app(eng, loaded.name)
    drv = app.state.infercast.engine  # the AsyncEngine
    drv.on_step = parts["on_step"].wrap(drv.on_step)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result: dict = {}

    def client() -> None:
        import urllib.request

        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        for c in parts.values():
            c.wall = c.cpu = 0.0
            c.calls = 0
        decode_steps.clear()
        per_step.clear()
        starts.clear()
        cpu_clock.clear()
        members.clear()
        cpu0, t0, p0 = thread_cpu(), time.perf_counter(), time.process_time()
        out = subprocess.run(
            [sys.executable, "-m", "infercast", "bench", "--base-url", url + "/v1", "--model",
             args.model, "-n", str(args.requests), "--max-concurrency", str(args.concurrency),
             "--input-tokens", str(args.input_tokens), "--output-tokens",
             str(args.output_tokens), "--seed", "1", "--json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        result.update(
            wall=time.perf_counter() - t0,
            proc_cpu=time.process_time() - p0,
            threads={k: v - cpu0.get(k, 0.0) for k, v in thread_cpu().items()},
            bench_rc=out.returncode,
        )
        try:
            b = json.loads(out.stdout)
            result["ttft_ms"], result["tpot_ms"] = b.get("mean_ttft_ms"), b.get("mean_tpot_ms")
        except json.JSONDecodeError:
            result["bench_err"] = out.stderr[-2000:]
        server.should_exit = True

    import uvicorn

    from infercast.engine.http_limits import ServerLimits, uvicorn_config

    server = uvicorn.Server(
        uvicorn_config(app, "127.0.0.1", port, ServerLimits(), log_level="warning")
    )
    threading.Thread(target=client, daemon=True).start()
    server.run()
    steps = parts["step"].calls
    tokens = parts["sample"].calls
    rest_cpu = parts["step"].cpu - parts["forward"].cpu - parts["sample"].cpu
    rest_cpu -= parts["append"].cpu
    report = {
        "weights": args.weights,
        "load": open("/proc/loadavg").read().split()[:3],
        "steps": steps,
        "sampled_tokens": tokens,
        "steps_by_sampled": dict(sorted(decode_steps.items())),
        **{
            f"{k}_{m}_ms_per_step": 1e3 * getattr(c, m) / max(steps, 1)
            for k, c in parts.items()
            for m in ("cpu", "wall")
        },
        "sample_cpu_us_per_token": 1e6 * parts["sample"].cpu / max(tokens, 1),
        "append_cpu_us_per_token": 1e6 * parts["append"].cpu / max(tokens, 1),
        "step_rest_cpu_ms_per_step": 1e3 * rest_cpu / max(steps, 1),
        **result,
    }
    import statistics

    eng_thread = result.get("threads", {}).get(str(last.get("tid")), 0.0)
    report["engine_thread_cpu_s"] = eng_thread
    main_tid = str(threading.main_thread().native_id)
    report["event_loop_thread_cpu_s"] = result.get("threads", {}).get(main_tid, 0.0)
    dec = [r for r in per_step if r[0] == r[1] and r[0] == args.concurrency]
    if dec:
        report[f"decode{args.concurrency}_steps"] = len(dec)
        report[f"decode{args.concurrency}_forward_wall_ms_median"] = 1e3 * statistics.median(
            r[2] for r in dec
        )
        report[f"decode{args.concurrency}_forward_cpu_ms_median"] = 1e3 * statistics.median(
            r[3] for r in dec
        )
    gaps = [
        b[4] - a[4]
        for a, b in zip(per_step, per_step[1:], strict=False)
        if a[0] == a[1] == b[0] == b[1] == args.concurrency
    ]
    if gaps:
        report[f"decode{args.concurrency}_step_interval_ms_median"] = 1e3 * statistics.median(gaps)
    other = result.get("proc_cpu", 0.0) - eng_thread
    report["non_engine_thread_cpu_ms_per_token"] = 1e3 * other / max(tokens, 1)
    report["serve_share"] = result.get("proc_cpu", 0.0) / max(result.get("wall", 1.0), 1e-9)
    report.update(cpu_clock_metrics(cpu_clock, members, arrived))
    t0 = per_step[0][4] if per_step else 0.0
    report["trace"] = [  # per step: sampled rows, new tokens, forward ms wall and CPU, start ms
        (n, new, round(1e3 * w, 2), round(1e3 * c, 2), round(1e3 * (t - t0), 1))
        for n, new, w, c, t in per_step
    ]
    text = json.dumps(report, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "trace"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
