"""How far the bench client's TTFT/TPOT are from the truth, and where the client becomes the
bottleneck.

Starts ``infercast mock-server`` (50 ms TTFT, 10 ms ITL, in its own process),
runs the bench client against it at concurrency 1 and 64 (issue 6 goals:
within 1 ms at C=1, within 3 ms at C=64), then sweeps concurrency and request
rate to find the ceiling below which the client's own error stays under 2 ms.

Truth is what the mock recorded it did (first/last chunk write times from the
request's receipt, stamped when its bytes are read, before parsing), not only its nominal 50/10 ms,
since asyncio sleeps overshoot by up to 1 ms. Columns:

- err_ttft_ms: client mean TTFT - mock mean TTFT over the same requests: an
  upper bound on the client's error (it includes loopback transit and the
  time until the server reads the request's bytes);
- read_delay: client stamp of the first chunk - the mock's write of it, per
  request on the host's one monotonic clock (the client's own stamping error);
- client_out: scheduled (closed loop: issued) send -> request headers serialized, written at once
  (the client's own delay on the way out; part of TTFT by design);
- send_to_server: mock receipt - headers serialized (the write, loopback transit, and
  the mock's wake-up; under a burst of 64 simultaneous requests its queue).

The client's own error is client_out + read_delay; err_ttft adds the server's
side of the request's trip.

    python benchmarks/bench_client_error.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time

import httpx
import numpy as np

from infercast.bench.run import BenchConfig, run_bench

TTFT_S, ITL_S, OUT = 0.05, 0.01, 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mock(port: int) -> subprocess.Popen:
    code = (
        "from infercast.bench.mock import MockConfig; "
        "from infercast.bench.mock_http import serve; "
        f"serve(MockConfig(ttft_s={TTFT_S}, itl_s={ITL_S}), port={port})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=0.5)
            return proc
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mock server did not start")


def truth_rows(port: int) -> list[dict]:
    return httpx.get(f"http://127.0.0.1:{port}/mock/truth", timeout=30).json()["requests"]


def one_run(port: int, label: str, **load) -> dict:
    before = max((r["index"] for r in truth_rows(port)), default=0)
    cfg = BenchConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        model="mock",
        input_tokens=32,
        output_tokens=OUT,
        warmup_requests=1,
        **load,
    )
    res = run_bench(cfg)
    rows = {r["request_id"]: r for r in truth_rows(port) if r["index"] > before}
    ok = [r for r in res.records if r.ok and r.request_id in rows]
    s, d = res.summary, res.to_json()
    m = [rows[r.request_id] for r in ok]
    # per request, on the host's one monotonic clock (client and mock both read perf_counter)
    read = (
        np.array([r.chunk_times_s[0] - t["first_write_s"] for r, t in zip(ok, m, strict=True)])
        * 1e3
    )
    to_server = np.array([t["receipt_s"] - r.send_s for r, t in zip(ok, m, strict=True)]) * 1e3
    # scheduled (or issued) -> request headers written: the client's own delay on the way out
    out = np.array([r.send_s - r.arrival_s for r in ok]) * 1e3
    client_ttft = np.mean([r.ttft_s for r in ok])
    mock_ttft, mock_tpot = np.mean([t["ttft_s"] for t in m]), np.mean([t["tpot_s"] for t in m])
    return {
        "load": label,
        "completed": s.completed,
        "failed": s.failed,
        "client_ttft_ms": client_ttft * 1e3,
        "mock_ttft_ms": mock_ttft * 1e3,
        "err_ttft_ms": (client_ttft - mock_ttft) * 1e3,
        "err_ttft_vs_nominal_ms": (client_ttft - TTFT_S) * 1e3,
        "err_tpot_ms": (np.mean([r.tpot_s for r in ok]) - mock_tpot) * 1e3,
        "read_delay_p50_ms": np.percentile(read, 50),
        "read_delay_p99_ms": np.percentile(read, 99),
        "client_own_mean_ms": float(np.mean(out) + np.mean(read)),
        "client_out_p50_ms": np.percentile(out, 50),
        "client_out_p99_ms": np.percentile(out, 99),
        "send_to_server_p50_ms": np.percentile(to_server, 50),
        "send_to_server_p99_ms": np.percentile(to_server, 99),
        "achieved_concurrency": d["achieved_concurrency"],
        "req_per_s": s.request_throughput_rps,
        "p99_send_lag_ms": d["p99_send_lag_ms"],
        "p99_loop_lag_ms": d["p99_loop_lag_ms"],
        "client_cpu": d["client_cpu_fraction"],
        "warnings": len(res.warnings),
    }


POINTS = [
    ("C=1", {"concurrency": 1, "num_requests": 30}),
    ("C=64", {"concurrency": 64, "num_requests": 640}),
]
SWEEP = [
    (f"C={c}", {"concurrency": c, "num_requests": max(5 * c, 64)}) for c in (16, 32, 128, 256, 512)
] + [
    (f"{r} req/s", {"request_rate": float(r), "num_requests": int(min(3 * r, 1500))})
    for r in (20, 100, 200, 400, 800)
]
KEYS = (
    "err_ttft_ms",
    "client_own_mean_ms",
    "err_tpot_ms",
    "err_ttft_vs_nominal_ms",
    "read_delay_p50_ms",
    "read_delay_p99_ms",
    "client_out_p50_ms",
    "client_out_p99_ms",
    "send_to_server_p50_ms",
    "send_to_server_p99_ms",
    "achieved_concurrency",
    "req_per_s",
    "p99_loop_lag_ms",
    "client_cpu",
)
COMPACT = (
    ("err_ttft_ms", "err TTFT"),
    ("client_own_mean_ms", "client own"),
    ("send_to_server_p50_ms", "to server p50"),
    ("send_to_server_p99_ms", "p99"),
    ("client_out_p99_ms", "client out p99"),
    ("read_delay_p99_ms", "read p99"),
    ("err_tpot_ms", "err TPOT"),
    ("achieved_concurrency", "achieved C"),
    ("req_per_s", "req/s"),
    ("client_cpu", "client CPU"),
)
BUDGET_MS = 2.0  # issue 6: the ceiling is where the client's error reaches 2 ms


def median_row(label: str, runs: list[dict]) -> dict:
    row: dict = {"load": label, "failed": sum(r["failed"] for r in runs)}
    for k in KEYS:
        row[k] = float(np.median([r[k] for r in runs]))
    err = [r["err_ttft_ms"] for r in runs]
    row["err_ttft_range_ms"] = f"{min(err):.2f}..{max(err):.2f}"
    return row


def print_tables(table: list[dict], trials: int, load_before: str, wide: bool) -> None:
    load_after = open("/proc/loadavg").read().split()[0]
    print(
        f"medians of {trials} runs per point; mock {TTFT_S * 1e3:.0f} ms TTFT / {ITL_S * 1e3:.0f} "
        f"ms ITL, {OUT} output tokens; load average {load_before} before, {load_after} after; "
        "times in ms"
    )
    cols = (
        list(table[0])
        if wide
        else ["load", "failed", *(k for k, _ in COMPACT), "err_ttft_range_ms"]
    )
    names = {k: n for k, n in COMPACT} | {"err_ttft_range_ms": "err TTFT range"}
    print("| " + " | ".join(names.get(c, c) for c in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in table:
        print(
            "| "
            + " | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols)
            + " |"
        )
    for kind, pick in (
        ("streams", lambda r: r["load"].startswith("C=")),
        ("req/s", lambda r: "req/s" in r["load"]),
    ):
        pts = [r for r in table if pick(r)]
        under = [r["load"] for r in pts if r["err_ttft_ms"] < BUDGET_MS and not r["failed"]]
        over = [r["load"] for r in pts if r["err_ttft_ms"] >= BUDGET_MS or r["failed"]]
        if pts:
            print(
                f"ceiling ({kind}): err TTFT < {BUDGET_MS:.0f} ms at {', '.join(under) or 'none'}; "
                f">= {BUDGET_MS:.0f} ms at {', '.join(over) or 'none'}"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="only the two goal points")
    ap.add_argument(
        "--trials", type=int, default=3, help="runs per point (the machine is shared: medians)"
    )
    ap.add_argument("--wide", action="store_true", help="every column, not the compact table")
    args = ap.parse_args()
    load_before = open("/proc/loadavg").read().split()[0]
    port = free_port()
    proc = start_mock(port)
    table = []
    try:
        for label, load in POINTS + ([] if args.quick else SWEEP):
            runs = [one_run(port, label, **load) for _ in range(args.trials)]
            table.append(median_row(label, runs))
            print(json.dumps({"point": label, "runs": runs}), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print_tables(table, args.trials, load_before, args.wide)


if __name__ == "__main__":
    main()
