"""Side by side: infercast simulate vs Vidur on the same workload (issue 3).

Workload: Llama-3 8B on one H100, Azure 2023 conversation lengths, Poisson at
``--qps`` (default: 80 % of infercast's simulated capacity, ~16 req/s), chunked
(Sarathi) scheduling with an 8192-token budget and 256 sequences.

Vidur 0.0.26 cannot run offline: as installed it downloads its profiling data
from a model hub at run time and trains its runtime predictors on first use
(minutes per operator on these cores); this machine has no network. So unless
``--vidur-python`` points at a Python whose Vidur has its profiling data and
trained predictors cached, the script says so and compares against the Vidur
speed published in issue 3 (64,000 requests in 110-130 CPU-seconds, i.e.
400-600 requests per CPU-second, 1-1.7 GB of memory).

Run:
    python benchmarks/sim_vidur.py [--num-requests 20000] [--vidur-python /path/to/venv/bin/python]
"""

from __future__ import annotations

import argparse
import csv
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from infercast.sim.config import build_config
from infercast.sim.presets import build_step_model
from infercast.sim.run import simulate
from infercast.sim.workload import load_trace

VIDUR_PUBLISHED_REQ_PER_CPU_S = (400.0, 600.0)  # issue 3: 64k requests in 110-130 CPU-s


def infercast_speed(n: int, qps: float) -> tuple[float, float]:
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "seed": 1,
            "scheduler": {"policy": "chunked", "max_num_seqs": 256, "max_num_batched_tokens": 8192},
            "workload": {"rate": qps, "num_requests": n, "trace": "azure-conv"},
        }
    )
    model = build_step_model(cfg)
    t0 = time.process_time()
    simulate(cfg, model)
    cpu = time.process_time() - t0
    return cpu, n / cpu


def vidur_command(python: str, trace_file: Path, n: int, qps: float, out_dir: Path) -> list[str]:
    """Vidur's CLI as documented in its README (flat ``--<config>_<field>`` flags)."""
    return [
        python,
        "-m",
        "vidur.main",
        "--replica_config_device",
        "h100",
        "--replica_config_model_name",
        "meta-llama/Meta-Llama-3-8B",
        "--cluster_config_num_replicas",
        "1",
        "--replica_config_tensor_parallel_size",
        "1",
        "--replica_config_num_pipeline_stages",
        "1",
        "--request_generator_config_type",
        "synthetic",
        "--synthetic_request_generator_config_num_requests",
        str(n),
        "--length_generator_config_type",
        "trace",
        "--trace_request_length_generator_config_max_tokens",
        "16384",
        "--trace_request_length_generator_config_trace_file",
        str(trace_file),
        "--interval_generator_config_type",
        "poisson",
        "--poisson_request_interval_generator_config_qps",
        str(qps),
        "--replica_scheduler_config_type",
        "sarathi",
        "--sarathi_scheduler_config_batch_size_cap",
        "256",
        "--sarathi_scheduler_config_chunk_size",
        "8192",
        "--metrics_config_output_dir",
        str(out_dir),
    ]


def run_vidur(python: str, n: int, qps: float) -> float | None:
    """CPU seconds Vidur took, or None (with the reason printed) if it cannot run."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_file = Path(tmp) / "conv.csv"
        tr = load_trace("azure-conv")
        with trace_file.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["num_prefill_tokens", "num_decode_tokens"])
            w.writerows(zip(tr.prompt_tokens.tolist(), tr.output_tokens.tolist(), strict=True))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            vidur_command(python, trace_file, n, qps, Path(tmp) / "out"),
            capture_output=True,
            text=True,
            timeout=3600,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        print("Vidur did not run:", *tail, sep="\n  ")
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-requests", type=int, default=20_000)
    ap.add_argument("--qps", type=float, default=16.0)
    ap.add_argument("--vidur-python", help="Python of a virtual environment with a runnable Vidur")
    args = ap.parse_args()
    cpu, rate = infercast_speed(args.num_requests, args.qps)
    print(
        f"infercast: {args.num_requests:,} requests at {args.qps} req/s in {cpu:.2f} CPU-s "
        f"= {rate:,.0f} requests/CPU-s"
    )
    vidur_cpu = (
        run_vidur(args.vidur_python, args.num_requests, args.qps) if args.vidur_python else None
    )
    if vidur_cpu is not None:
        v = args.num_requests / vidur_cpu
        print(
            f"Vidur: {vidur_cpu:.1f} CPU-s = {v:,.0f} requests/CPU-s; infercast is {rate / v:.0f}x "
            "faster"
        )
        return
    if not args.vidur_python:
        print(
            "Vidur not run: it cannot run offline (it fetches profiling data from a model hub at "
            "run time); pass --vidur-python to try an environment that has the data cached."
        )
    lo, hi = VIDUR_PUBLISHED_REQ_PER_CPU_S
    print(
        f"Against Vidur's published {lo:.0f}-{hi:.0f} requests/CPU-s (issue 3): "
        f"infercast is {rate / hi:.0f}-{rate / lo:.0f}x faster"
    )


if __name__ == "__main__":
    main()
