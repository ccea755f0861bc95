"""How close the CPU engine runs to this machine's roofline, and to the cost model.

Measures the machine first (same process, same BLAS threads), then times the
engine's forward step directly (no HTTP, no scheduler) for:

- decode at batch 1, 2, 4, ... (one new token per sequence on ``--context``
  cached tokens): achieved bytes/s against the read-bandwidth floor, tokens/s;
- prefill of 128 and 512 tokens: achieved FLOP/s against the measured matmul peak;
- the cost model's floor (peak GEMM, full bandwidth) and expected time with the
  default efficiency profile next to every measurement;
- the cost model's prediction with the efficiency profile fitted to this machine's
  engine rates (``infercast machine --model M``: GEMM rate vs rows, attention,
  per-step overhead; measured in this process before and after the engine's
  steps, best of both, unless ``--profile`` names a file), measured / predicted
  per batch (wall and thread CPU time), and the spread of that ratio across
  decode batches: the roofline's *shape* is followed when it is flat.

Goals (issue 5): decode at batch 1 >= 80% of the bandwidth floor; prefill >= 60%
of the matmul peak; tokens/s vs batch following the roofline's shape. Beside the
best wall times it prints the best thread CPU times and the rates they give
("tok/s cpu", "cpu frac of peak"): on a shared machine a run whose CPU time is
well under its wall time waited for a core, and the CPU-time rates are the
engine's own.

    python benchmarks/engine_roofline.py --model 100m --threads 1
    python benchmarks/engine_roofline.py --model 1b --batches 1,4,16 --runs 3
    python benchmarks/engine_roofline.py --model 100m --hardware local-cpu.toml \
        --profile local-cpu-profile.toml      # profiles from `infercast machine --model 100m`
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from infercast.engine.engine import make_model
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.loader import load
from infercast.engine.machine_probe import probe
from infercast.engine.model import SeqInput
from infercast.engine.predict import (
    decode_read_bytes,
    hardware_from_probe,
    matmul_flops,
    step_model,
)

# Measured on a machine of this kind with llama.cpp on the same GGUF file (NOTES.md, issue 5).
LLAMA_CPP_SMOLLM2_STEP_S = 8.7e-3


def _time(fn, runs: int) -> tuple[float, float, float]:
    """Best and median wall time, and the best thread CPU time (seconds).

    CPU time excludes time this thread waited for a core, so on a shared machine a
    best CPU time well under the best wall time says the run was contended.
    """
    fn()  # warm-up
    times, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return min(times), statistics.median(times), min(cpu)


def _tables(batch: int, context: int, block_size: int) -> list[list[int]]:
    per_seq = -(-(context + 1) // block_size)
    return [list(range(b * per_seq, (b + 1) * per_seq)) for b in range(batch)]


def decode_rows(model, kv, batches, context, runs) -> list[dict]:
    """Time decode steps of ``b`` sequences at ``context`` cached tokens each."""
    rows = []
    for b in batches:
        seqs = [SeqInput([7], context, t) for t in _tables(b, context, kv.block_size)]
        best, med, cpu = _time(lambda seqs=seqs: model.forward(seqs, kv), runs)
        rows.append({"batch": b, "best_s": best, "median_s": med, "best_cpu_s": cpu})
    return rows


def prefill_rows(model, cfg, lengths, runs, block_size) -> list[dict]:
    """Time one prompt's prefill of ``n`` tokens."""
    rows = []
    for n in lengths:
        kv = PagedKVStore(cfg, -(-n // block_size) + 1, block_size)
        seq = [SeqInput(list(np.arange(n) % cfg.vocab_size), 0, _tables(1, n, block_size)[0])]
        best, med, cpu = _time(lambda seq=seq, kv=kv: model.forward(seq, kv), runs)
        rows.append({"tokens": n, "best_s": best, "median_s": med, "best_cpu_s": cpu})
    return rows


def finish_rows(dec, pre, cfg, w, model, sm, bw, peak, context, fitted=None) -> None:
    """Add floors, achieved fractions and the cost model's numbers to the timed rows.

    ``fitted``: a StepModel with the machine's fitted efficiency profile; adds
    its prediction and measured / predicted to every row.
    """
    stored = getattr(model, "weight_bytes", None)  # torch: the bf16 matrices
    for r in dec:
        b = r["batch"]
        floor = decode_read_bytes(cfg, w, [context + 1] * b, stored) / bw
        cost = sm.step_cost([1] * b, [context] * b)
        r.update(
            floor_s=floor,
            frac_of_floor_best=floor / r["best_s"],
            frac_of_floor_median=floor / r["median_s"],
            tokens_per_s_best=b / r["best_s"],
            tokens_per_s_cpu=b / r["best_cpu_s"],
            model_floor_s=cost.floor_time_s,
            model_expected_s=cost.time_s,
            model_bound=cost.bound,
        )
        if fitted is not None:
            pred = fitted.step_cost([1] * b, [context] * b).time_s
            r.update(
                predicted_s=pred,
                measured_over_predicted=r["best_s"] / pred,
                cpu_over_predicted=r["best_cpu_s"] / pred,
            )
    for r in pre:
        flops = matmul_flops(cfg, r["tokens"], 0)
        cost = sm.step_cost([r["tokens"]], [0])
        r.update(
            flops=flops,
            frac_of_peak_best=flops / r["best_s"] / peak,
            frac_of_peak_cpu=flops / r["best_cpu_s"] / peak,
            frac_of_peak_median=flops / r["median_s"] / peak,
            model_floor_s=cost.floor_time_s,
            model_expected_s=cost.time_s,
        )
        if fitted is not None:
            pred = fitted.step_cost([r["tokens"]], [0]).time_s
            r.update(
                predicted_s=pred,
                measured_over_predicted=r["best_s"] / pred,
                cpu_over_predicted=r["best_cpu_s"] / pred,
            )


def best_of(a: dict, b: dict) -> dict:
    """Two probe results merged: the larger best of every figure (the less contended run)."""
    out = dict(a)
    out["memory_bandwidth_bytes_per_s"] = max(
        a["memory_bandwidth_bytes_per_s"], b["memory_bandwidth_bytes_per_s"]
    )
    out["matmul_flops_per_s"] = {
        k: max(v, b["matmul_flops_per_s"].get(k, 0.0)) for k, v in a["matmul_flops_per_s"].items()
    }
    out["measurements_after"] = b["measurements"]
    return out


def engine_rates(cfg, machine, args):
    """The engine's rate points (rate_probe) for the fitted profile; None if not fitted here."""
    if args.profile or args.backend != "numpy":
        return None
    from infercast.engine.machine_probe import stream_bytes
    from infercast.engine.rate_probe import measure

    sm = step_model(cfg, hardware_from_probe(machine))  # attention ops: FLOPs and bytes only
    return measure(cfg, sm, runs=args.runs, threads=args.threads, stream_bytes=stream_bytes())


def fitted_profile(cfg, sm, args, points):
    """The machine's efficiency profile: ``--profile``, or fitted to the rate points."""
    if args.profile:
        from infercast.cost.efficiency import load_profile

        return load_profile(args.profile)
    if points is None:
        return None
    from infercast.engine.profile_fit import fit_profile

    return fit_profile(points, sm.machine, name=f"fitted here ({cfg.name})").profile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="100m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batches", default="1,2,4,8,16,32")
    ap.add_argument("--prefill", default="128,512")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--backend", default="numpy", help="numpy (fp32) | torch (bf16 weights)")
    ap.add_argument(
        "--hardware", help="hardware profile (infercast machine); default: measured here"
    )
    ap.add_argument(
        "--profile",
        help="efficiency profile (infercast machine --model M); "
        "default: fitted here to this process's measurements",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    machine = probe(threads=args.threads, runs=args.runs)
    dtype = "bf16" if args.backend == "torch" else "fp32"
    loaded = load(args.model)
    cfg, w = loaded.cfg, loaded.weights
    batches = [int(x) for x in args.batches.split(",")]
    lengths = [int(x) for x in args.prefill.split(",")]
    model = make_model(loaded, max(args.context + 2, max(lengths) + 1), args.backend, args.threads)
    block = 16
    kv = PagedKVStore(cfg, max(batches) * (-(-(args.context + 1) // block)), block)
    rates = engine_rates(cfg, machine, args)
    with threadpool_limits(args.threads):
        dec = decode_rows(model, kv, batches, args.context, args.runs)
        pre = prefill_rows(model, cfg, lengths, args.runs, block)
    # The machine is shared: probe again after the model runs and keep the best of both,
    # so best-of-runs model times are compared with a best-of-runs machine.
    machine = best_of(machine, probe(threads=args.threads, runs=args.runs))
    if rates is not None:
        rates = [
            min(a, b, key=lambda p: p.best_cpu_s)
            for a, b in zip(rates, engine_rates(cfg, machine, args), strict=True)
        ]
    hw = hardware_from_probe(machine)
    if args.hardware:
        from infercast.specs.catalog import load_hardware

        hw = load_hardware(args.hardware)
    bw, peak = hw.memory_bandwidth_bytes_per_s, hw.peak_flops(dtype)
    sm = step_model(cfg, hw, backend=args.backend)
    profile = fitted_profile(cfg, sm, args, rates)
    fitted = step_model(cfg, hw, profile=profile) if profile is not None else None
    finish_rows(dec, pre, cfg, w, model, sm, bw, peak, args.context, fitted)
    out = {
        "model": loaded.name,
        "params": cfg.num_params,
        "threads": args.threads,
        "backend": args.backend,
        "dtype": dtype,
        "weights_stored_bytes": loaded.stored_bytes,
        "machine": machine,
        "profile": profile.to_dict() if profile is not None else None,
        "decode": dec,
        "prefill": pre,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    _print(out, bw, peak)


def _print(out, bw, peak) -> None:
    print(
        f"{out['model']}: {out['params'] / 1e6:.0f}M params, {out['backend']} backend, "
        f"{out['threads']} thread(s); read bandwidth {bw / 1e9:.1f} GB/s, {out['dtype']} "
        f"matmul peak {peak / 1e9:.0f} GFLOP/s "
        "(best of runs; GB = 1e9 B)"
    )
    print(
        "decode  batch  best ms  median ms  floor ms  best/floor  med/floor  tok/s"
        "  model floor ms  model expected ms  best cpu ms  tok/s cpu"
    )
    for r in out["decode"]:
        print(
            f"        {r['batch']:5d} {r['best_s'] * 1e3:8.2f} {r['median_s'] * 1e3:10.2f} "
            f"{r['floor_s'] * 1e3:9.2f} {r['frac_of_floor_best']:11.2f} "
            f"{r['frac_of_floor_median']:10.2f} {r['tokens_per_s_best']:6.1f} "
            f"{r['model_floor_s'] * 1e3:15.2f} {r['model_expected_s'] * 1e3:18.2f} "
            f"{r['best_cpu_s'] * 1e3:12.2f} {r['tokens_per_s_cpu']:10.1f}"
        )
    if out["profile"] is not None:
        _print_shape(out)
    one = next((r for r in out["decode"] if r["batch"] == 1), None)
    if one is not None:
        stored = out["weights_stored_bytes"]
        print(
            f"batch 1: {one['best_s'] * 1e3:.2f} ms/step; weights as stored {stored / 1e6:.0f} MB "
            f"-> stored-bytes floor {stored / bw * 1e3:.2f} ms; the engine reads {out['dtype']} "
            f"(floor {one['floor_s'] * 1e3:.2f} ms). llama.cpp reference for SmolLM2-135M "
            f"Q4_1 on this kind of machine: {LLAMA_CPP_SMOLLM2_STEP_S * 1e3:.1f} ms/step."
        )
    print(
        "prefill tokens  best ms  median ms  GFLOP/s  frac of peak (best, median)"
        "  model floor ms  model expected ms  best cpu ms  cpu frac of peak"
    )
    for r in out["prefill"]:
        print(
            f"        {r['tokens']:6d} {r['best_s'] * 1e3:8.1f} {r['median_s'] * 1e3:10.1f} "
            f"{r['flops'] / r['best_s'] / 1e9:8.1f} {r['frac_of_peak_best']:10.2f} "
            f"{r['frac_of_peak_median']:7.2f} {r['model_floor_s'] * 1e3:20.1f} "
            f"{r['model_expected_s'] * 1e3:18.1f} {r['best_cpu_s'] * 1e3:12.1f} "
            f"{r['frac_of_peak_cpu']:16.2f}"
        )


def _print_shape(out) -> None:
    """Tokens/s vs batch: measured, the pure floor, and the machine-profile prediction."""
    p = out["profile"]
    print(
        f"machine profile {p['name']!r}: gemm_compute_eff {p['gemm_compute_eff']:.3f}, "
        f"gemm_m_half {p['gemm_m_half']:.1f}, mem_bw_eff {p['mem_bw_eff']:.3f}, attn_bw_eff "
        f"{p['attn_bw_eff']:.3f}, step overhead {p['step_overhead_s'] * 1e3:.2f} ms + "
        f"{p.get('layer_overhead_s', 0.0) * 1e3:.3f} ms per layer"
    )
    print(
        "shape   batch  tok/s measured  tok/s floor (peak)  tok/s predicted  measured/predicted"
        "  cpu/predicted"
    )
    for r in out["decode"]:
        b = r["batch"]
        print(
            f"        {b:5d} {b / r['best_s']:15.1f} {b / r['model_floor_s']:19.1f} "
            f"{b / r['predicted_s']:16.1f} {r['measured_over_predicted']:19.2f} "
            f"{r['cpu_over_predicted']:14.2f}"
        )
    for r in out["prefill"]:
        n = r["tokens"]
        print(
            f"   prefill {n:4d} {n / r['best_s']:13.1f} {n / r['model_floor_s']:19.1f} "
            f"{n / r['predicted_s']:16.1f} {r['measured_over_predicted']:19.2f} "
            f"{r['cpu_over_predicted']:14.2f}"
        )
    for key, what in (("measured_over_predicted", "wall"), ("cpu_over_predicted", "cpu")):
        ratios = [r[key] for r in out["decode"]]
        every = ratios + [r[key] for r in out["prefill"]]
        print(
            f"{what}/predicted spread: decode {min(ratios):.2f}-{max(ratios):.2f} "
            f"(max/min {max(ratios) / min(ratios):.2f}); with prefill "
            f"{min(every):.2f}-{max(every):.2f} (max/min {max(every) / min(every):.2f})"
        )


if __name__ == "__main__":
    main()
