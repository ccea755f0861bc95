"""Turn ``benchmarks/gpu_steps.py`` results into rows of the shipped measurement set.

Each step (prefill or decode, model, weights, batch, tokens) becomes one ``kernel`` row of
``src/infercast/data/measurements.csv`` whose value is the mean over the runs given of each
run's median replay time (the runs' medians and replay counts are kept in ``extra``); the
part's measured ceilings (bf16 and fp8 matrix products, device copy) become ``kernel`` rows
and rows of ``hardware_measured.csv``. Rows of the same ``--source`` are replaced, so the
script can be rerun; every other row is left as it is.

    python benchmarks/gpu_steps_rows.py benchmarks/results/gpu_steps_h200_2026-12-04_run*.json \
        --source infercast-gpu-steps-h200-2026-12-04 --id-prefix H200S --commit 9966a92 \
        --date 2026-12-04 --write
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "src" / "infercast" / "data"
HARDWARE = "h200-sxm"
SPEC = {  # hardware.csv's h200-sxm figures the ceilings are read against
    "bf16": ("bf16_flops", 9.89e14),
    "fp8": ("fp8_flops", 1.979e15),
    "copy": ("memory_bandwidth_bytes_per_s", 4.8e12),
}


METRIC = {"prefill": "prefill_time_s", "decode": "decode_step_s", "mixed": "mixed_step_s"}
DATASET = {
    "prefill": "one prefill step of random tokens",
    "decode": "one decode step, every sequence at this context (random tokens)",
    "mixed": "one chunked-prefill step: the decode batch at this context and one fresh "
    "prompt's chunk of extra.prefill_chunk_tokens (random tokens)",
}


def step_key(step: dict) -> tuple:
    return (step["model"], step["weights"], step["kind"], step["batch"],
            step.get("tokens", step.get("context")), step.get("chunk"))  # fmt: skip


def merged_steps(runs: list[dict]) -> list[dict]:
    """Steps in the first run's order, each with the medians of every run that has it."""
    by_key: dict[tuple, list[dict]] = {}
    for run in runs:
        for step in run["steps"]:
            by_key.setdefault(step_key(step), []).append(step)
    return [{"first": s[0], "runs": s} for s in by_key.values()]


def _citation(env: dict, commit: str, date: str, files: list[str]) -> str:
    return (
        f"infercast benchmarks/gpu_steps.py @{commit}, run {date} on one {env['gpu']} "
        f"(SXM, {env.get('nvidia_smi', '')}), torch {env['torch']}; raw results "
        + " and ".join(files)
    )


def step_rows(runs: list[dict], args, citation: str) -> list[dict]:
    env = runs[0]["environment"]
    engine = f"pytorch {env['torch'].split('+')[0]} (cuda graphs; infercast gpu_steps)"
    rows = []
    for i, s in enumerate(merged_steps(runs), start=1):
        first, medians = s["first"], [r["median_s"] for r in s["runs"]]
        kind = first["kind"]
        extra = {
            "run_medians_s": [round(m, 9) for m in medians],
            "replays_per_run": first["reps"],
            "timing": "CUDA events around each CUDA-graph replay; median per run",
            "attention": first["attention"],
            "weights_random": True,
        }
        if "eager_s" in first:
            extra["eager_median_s"] = round(first["eager_s"], 9)
        if kind == "mixed":
            extra["prefill_chunk_tokens"] = first["chunk"]
        if first["weights"] == "int4":
            extra["int4"] = ("weight-only: groups of 128 with a bf16 scale and zero, PyTorch's "
                             "tinygemm kernel; bf16 activations, lm_head bf16")  # fmt: skip
        if first["weights"] == "fp8":
            extra["fp8"] = "e4m3 weights and activations, per-tensor scale, lm_head bf16"
        rows.append({
            "id": f"{args.id_prefix}-{i:04d}", "source": args.source, "citation": citation,
            "model": first["model"], "hardware": HARDWARE, "n_gpus": 1, "tp": 1, "pp": 1,
            "weights": first["weights"], "kv_cache": "bf16", "engine": engine,
            "scenario": "kernel",
            "input_tokens": first["tokens"] if kind == "prefill" else first["context"],
            "output_tokens": "", "dataset": DATASET[kind], "batch": first["batch"],
            "metric": METRIC[kind],
            "value": round(statistics.fmean(medians), 9), "unit_si": "s",
            "quality": "primary", "extra": json.dumps(extra, separators=(",", ":")),
        })  # fmt: skip
    return rows


def ceiling_rows(runs: list[dict], args, citation: str, start: int) -> list[dict]:
    env = runs[0]["environment"]
    engine = f"torch {env['torch']}"
    items = [
        ("bf16_matmul_flops_per_s", "bf16", "matmul_flops_per_s", "flop/s",
         "torch.matmul 8192x8192x8192 random bf16"),
        ("fp8_matmul_flops_per_s", "fp8", "matmul_flops_per_s", "flop/s",
         "torch._scaled_mm 8192x8192x8192 random e4m3, bf16 out"),
        ("copy_read_plus_write_bytes_per_s", "", "achieved_bandwidth_bytes_per_s", "bytes/s",
         "device-to-device copy of 4 GiB (bytes read + written)"),
    ]  # fmt: skip
    rows = []
    for n, (key, dtype, metric, unit, what) in enumerate(items, start=start):
        values = [r["ceilings"][key] for r in runs if key in r["ceilings"]]
        if not values:
            continue
        rows.append({
            "id": f"{args.id_prefix}-{n:04d}", "source": args.source, "citation": citation,
            "model": "", "hardware": HARDWARE, "n_gpus": 1, "tp": "", "pp": "",
            "weights": dtype, "kv_cache": "", "engine": engine, "scenario": "kernel",
            "input_tokens": "", "output_tokens": "", "dataset": what, "batch": "",
            "metric": metric, "value": float(f"{statistics.fmean(values):.4g}"),
            "unit_si": unit, "quality": "primary",
            "extra": json.dumps({"run_values": [float(f"{v:.4g}") for v in values]}),
        })  # fmt: skip
    return rows


def hardware_measured_rows(ceilings: list[dict], args) -> list[dict]:
    rows = []
    for row in ceilings:
        kind = row["weights"] or "copy"
        ref, spec = SPEC[kind]
        rows.append({
            "hardware": HARDWARE, "measurement": f"{row['metric']} | {row['dataset']}",
            "dtype": row["weights"], "value": row["value"], "unit_si": row["unit_si"],
            "spec_reference": ref, "spec_value": spec,
            "fraction_of_spec": f"{row['value'] / spec:.4f}", "n_gpus": 1,
            "engine": row["engine"], "measurement_id": row["id"], "source": args.source,
            "citation": row["citation"], "note": "measured by infercast (benchmarks/gpu_steps.py)",
        })  # fmt: skip
    return rows


def replace_source(path: Path, rows: list[dict], source: str, write: bool) -> int:
    """Rewrite ``path`` with its rows of ``source`` replaced by ``rows``, every other line kept
    byte for byte, line ending included (the files hold one row per line, mostly CRLF as
    imported); new rows end as the header does. Returns the rows kept."""
    with path.open(newline="") as f:
        header, *lines = f.read().splitlines(keepends=True)
    fields = next(csv.reader([header]))
    at = fields.index("source")
    kept = [line for line in lines if next(csv.reader([line]))[at] != source]
    if kept and not kept[-1].endswith(("\n", "\r")):
        kept[-1] += header[len(header.rstrip("\r\n")) :]
    out = io.StringIO()
    ending = header[len(header.rstrip("\r\n")) :] or "\n"
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator=ending)
    writer.writerows({f: r.get(f, "") for f in fields} for r in rows)
    if write:
        with path.open("w", newline="") as f:
            f.write("".join([header, *kept]) + out.getvalue())
    return len(kept)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="gpu_steps.py result JSON files")
    p.add_argument("--source", required=True)
    p.add_argument("--id-prefix", required=True)
    p.add_argument("--commit", required=True, help="the commit of gpu_steps.py that ran")
    p.add_argument("--date", required=True, help="the day the runs were taken (YYYY-MM-DD)")
    p.add_argument("--write", action="store_true", help="rewrite the data files")
    p.add_argument("--no-ceilings", action="store_true", help="steps only (ceilings shipped)")
    args = p.parse_args(argv)
    runs = [json.loads(f.read_text()) for f in args.runs]
    if any(r["errors"] for r in runs):
        p.error(f"a run reported errors: {[r['errors'] for r in runs]}")
    root = Path(__file__).resolve().parents[1]
    files = [str(f.resolve().relative_to(root)) for f in args.runs]
    citation = _citation(runs[0]["environment"], args.commit, args.date, files)
    steps = step_rows(runs, args, citation)
    ceilings = [] if args.no_ceilings else ceiling_rows(runs, args, citation, len(steps) + 1)
    kept = replace_source(DATA / "measurements.csv", steps + ceilings, args.source, args.write)
    replace_source(DATA / "hardware_measured.csv", hardware_measured_rows(ceilings, args),
                   args.source, args.write)  # fmt: skip
    print(f"{len(steps)} step rows, {len(ceilings)} ceiling rows; {kept} other rows kept"
          + ("" if args.write else " (dry run: --write to rewrite the files)"))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
