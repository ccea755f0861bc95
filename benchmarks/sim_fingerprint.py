"""Fingerprint of 23 simulations, to prove a speed change altered no result.

Each case's summary (wall/CPU time removed), time series, segment count, a
SHA-256 over the repr of every RequestRecord and each record's numbers (finish,
first scheduled, first token, exact sum of its token times, counts, reason) go
into one JSON file. Run it on
the old code and the new, and compare the files byte for byte:

    git archive HEAD src | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base/src python benchmarks/sim_fingerprint.py /tmp/base.json
    python benchmarks/sim_fingerprint.py /tmp/new.json
    cmp /tmp/base.json /tmp/new.json && echo IDENTICAL

Cases: the three policies in fast and exact mode; offline (fast and exact) and
closed loop; KV-scarce runs with preemptions; prefix caching with and without
scarcity; the code trace; 3 replicas; a small scheduler; rejections by
max_model_len and by KV; gamma arrivals; the 50k-request speed benchmark; a
sliding-window model and a disaggregated deployment.
About a minute of CPU. ``python benchmarks/sim_fingerprint.py OUT.json NAME...`` runs only
those cases;
``--quick`` runs the small cases the test suite compares with ``tests/sim/fingerprint_quick.json``
(made on the code before the step lifecycle was unified, commit 4edeabe).

Since speed round 6 results need not be bit-identical, only equal within floating-point noise:

    python benchmarks/sim_fingerprint.py --compare /tmp/base.json /tmp/new.json --rtol 1e-9

checks every float within ``rtol`` relative (or ``atol``, 1e-12, absolute: times near 0), every
integer, string and count exactly (the records' hash is skipped: it hashes float reprs; their count
must match), prints the largest relative difference seen and exits 1 at the first path that differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys

from infercast.sim.config import build_config

try:
    from infercast.sim.presets import build_step_model
except ImportError:  # a tree from before the move (A/B runs against an old commit)
    from infercast.commands.simulate import build_step_model
from infercast.sim.run import simulate

BASE = {"model": "llama-3.1-8b", "hardware": "h100-sxm"}


def cfg(
    policy="chunked",
    mode="fast",
    n=3000,
    rate=16.0,
    trace="azure-conv",
    extra_wl=None,
    sched=None,
    seed=3,
    **kw,
):
    wl = {"num_requests": n, "trace": trace}
    if rate == "offline":
        wl["arrival"] = "offline"
    elif rate == "closed":
        wl["concurrency"] = 64
    else:
        wl["rate"] = rate
    wl.update(extra_wl or {})
    s = {"policy": policy, **(sched or {})}
    return build_config({**BASE, "mode": mode, "seed": seed, "scheduler": s, "workload": wl, **kw})


def cases() -> dict:
    c = {}
    for pol in ("chunked", "continuous", "static"):
        for mode in ("fast", "exact"):
            c[f"{pol}-{mode}"] = cfg(pol, mode, n=2000 if pol != "static" else 600)
    c["chunked-offline"] = cfg(rate="offline", n=3000)
    c["chunked-offline-exact"] = cfg(rate="offline", n=1500, mode="exact")
    c["chunked-closed"] = cfg(rate="closed", n=2000)
    c["chunked-scarce"] = cfg(n=1500, rate=30.0, sched={"num_blocks": 900})
    c["chunked-scarce-exact"] = cfg(n=1500, rate=30.0, mode="exact", sched={"num_blocks": 900})
    c["cont-scarce"] = cfg("continuous", n=1500, rate=30.0, sched={"num_blocks": 900})
    c["prefix"] = cfg(
        n=2000, extra_wl={"prefix_groups": 4, "prefix_tokens": 2000}, sched={"prefix_caching": True}
    )
    c["prefix-scarce"] = cfg(
        n=1500,
        rate=30,
        extra_wl={"prefix_groups": 8, "prefix_tokens": 1000},
        sched={"prefix_caching": True, "num_blocks": 1200},
    )
    c["code"] = cfg(n=2000, trace="azure-code", rate=4.0)
    c["replicas"] = cfg(n=3000, rate=40.0, replicas=3)
    c["small-seqs"] = cfg(
        n=2000, rate=20.0, sched={"max_num_seqs": 16, "max_num_batched_tokens": 512}
    )
    c["rej-mml"] = cfg(n=3000, trace="azure-code", rate=6.0, seed=5, sched={"max_model_len": 1500})
    c["rej-kv"] = cfg(n=2000, trace="azure-code", rate=3.0, seed=6, sched={"num_blocks": 150})
    c["gamma"] = cfg(n=3000, rate=12.0, seed=7, extra_wl={"arrival": "gamma", "cv": 3.0})
    c["big50k"] = cfg(n=50000, rate=16.35)
    # Since round 6 (results within 1e-9, not bit for bit): the other timers a fast replica uses.
    c["windowed"] = cfg(
        n=600, rate=10.0, model="mistral-7b"
    )  # sliding window: segments capped by it
    c["disagg"] = cfg(
        n=1500,
        rate=12.0,
        disaggregation={  # the decode pool's DecodeTimer
            "prefill": {"replicas": 1},
            "decode": {"replicas": 1},
            "transfer_latency_s": 0.002,
            "transfer_bandwidth_bytes_per_s": 2e10,
        },
    )
    return c


def quick_cases() -> dict:
    """Small runs of the main paths, for the test suite (``tests/sim/test_run_fingerprint.py``):
    fast and exact steps, segments cut by arrivals, preemption, prefix caching, several replicas,
    closed loop, rejections, a sliding window, disaggregation and speculative decoding."""
    c = {}
    c["chunked-fast"] = cfg(n=300)
    c["chunked-exact"] = cfg(n=200, mode="exact")
    c["continuous-fast"] = cfg("continuous", n=200)
    c["static-fast"] = cfg("static", n=120)
    c["offline"] = cfg(rate="offline", n=300)
    c["closed"] = cfg(rate="closed", n=300)
    c["scarce"] = cfg(n=300, rate=30.0, sched={"num_blocks": 400})
    c["scarce-exact"] = cfg(n=200, rate=30.0, mode="exact", sched={"num_blocks": 400})
    c["prefix-scarce"] = cfg(
        n=300,
        rate=30,
        extra_wl={"prefix_groups": 8, "prefix_tokens": 1000},
        sched={"prefix_caching": True, "num_blocks": 600},
    )
    c["replicas"] = cfg(n=300, rate=40.0, replicas=3, router="least-tokens")
    c["rej-kv"] = cfg(n=200, trace="azure-code", rate=3.0, seed=6, sched={"num_blocks": 150})
    c["windowed"] = cfg(n=100, rate=10.0, model="mistral-7b")
    c["disagg"] = cfg(
        n=200,
        rate=12.0,
        disaggregation={
            "prefill": {"replicas": 1},
            "decode": {"replicas": 2},
            "transfer_latency_s": 0.002,
            "transfer_bandwidth_bytes_per_s": 2e10,
        },
    )
    c["speculative"] = cfg(
        n=120,
        rate=8.0,
        speculative={"method": "eagle", "num_speculative_tokens": 3, "acceptance": 0.7},
    )
    return c


def run_cases(
    names: list[str], all_cases: dict, progress=None, series_digest: bool = False
) -> dict:
    """Fingerprints of the named cases (the cost model built once per model); ``series_digest``
    keeps each time-series array as [length, exact sum, min, max] (a smaller file)."""
    model = build_step_model(cfg())
    out = {}
    for name in names:
        c = all_cases[name]
        out[name] = d = fingerprint(c, model if c.model == BASE["model"] else build_step_model(c))
        if series_digest:
            d["_series"] = {
                k: [len(v), math.fsum(v), min(v, default=None), max(v, default=None)]
                for k, v in d["_series"].items()
            }
        if progress is not None:
            progress(name, d)
    return json.loads(json.dumps(out, sort_keys=True, default=repr))  # as a saved file reads back


def fingerprint(c, model) -> dict:
    h, count = hashlib.sha256(), [0]

    nums: dict[str, list] = {}

    def sink(rec) -> None:
        count[0] += 1
        h.update(repr(rec).encode())
        times = rec.chunk_times_s
        nums[rec.request_id] = [  # what the hash covers, as numbers a tolerance can compare
            rec.finish_s,
            rec.first_scheduled_s,
            float(times[0]) if len(times) else None,
            math.fsum(times),
            len(times),
            rec.output_tokens,
            rec.num_preemptions,
            rec.finish_reason,
        ]

    r = simulate(c, model, sink=sink)
    d = r.to_dict()
    for k in ("sim_wall_s", "sim_cpu_s"):
        d.pop(k, None)
    d["_series"] = {k: v.tolist() for k, v in r.series.arrays().items()}
    d["_seg"] = getattr(r, "num_segments", None)
    d["_records"] = (count[0], h.hexdigest())
    d["_recnums"] = nums
    return d


def compare(
    a, b, rtol: float, atol: float, path: str = "", worst: list | None = None
) -> str | None:
    """First path where ``a`` and ``b`` differ beyond the tolerance (None: equal); ``worst`` becomes
    [the largest relative difference of two floats seen, its path]."""
    worst = worst if worst is not None else [0.0, ""]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path or '/'}: keys {sorted(a.keys() ^ b.keys())}"
        for k in sorted(a):
            if k == "_records":  # (count, hash of reprs): the count must match, the hash cannot
                if a[k][0] != b[k][0]:
                    return f"{path}/{k}: {a[k][0]} != {b[k][0]} records"
                continue
            bad = compare(a[k], b[k], rtol, atol, f"{path}/{k}", worst)
            if bad:
                return bad
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            bad = compare(x, y, rtol, atol, f"{path}[{i}]", worst)
            if bad:
                return bad
        return None
    if isinstance(a, float) or isinstance(b, float):
        if (
            not (isinstance(a, int | float) and isinstance(b, int | float))
            or isinstance(a, bool)
            or isinstance(b, bool)
        ):
            return f"{path}: {a!r} != {b!r}"
        if a == b or (math.isnan(a) and math.isnan(b)):
            return None
        diff = abs(a - b)
        scale = max(abs(a), abs(b))
        rel = diff / scale if scale else math.inf
        if rel > worst[0]:
            worst[0], worst[1:] = rel, [path]
        return (
            None
            if diff <= atol or diff <= rtol * scale
            else f"{path}: {a!r} != {b!r} (rel {diff / scale:.3g})"
        )
    return None if type(a) is type(b) and a == b else f"{path}: {a!r} != {b!r}"


def main_compare(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description="compare two fingerprints within a tolerance")
    ap.add_argument("--compare", nargs=2, metavar=("BASE.json", "NEW.json"), required=True)
    ap.add_argument("--rtol", type=float, default=1e-9)
    ap.add_argument("--atol", type=float, default=1e-12)
    args = ap.parse_args(argv)
    with open(args.compare[0]) as fa, open(args.compare[1]) as fb:
        a, b = json.load(fa), json.load(fb)
    worst = [0.0, ""]
    bad = compare(a, b, args.rtol, args.atol, "", worst)
    print(f"largest relative difference of two floats: {worst[0]:.3g} ({worst[1] or 'none'})")
    if bad:
        print(f"DIFFERENT at {bad}")
        sys.exit(1)
    print(f"EQUAL within rtol {args.rtol:g} / atol {args.atol:g}")


def main() -> None:
    if "--compare" in sys.argv[1:]:
        main_compare(sys.argv[1:])
        return
    args = sys.argv[1:]
    quick = "--quick" in args
    all_cases = quick_cases() if quick else cases()
    args = [a for a in args if a != "--quick"]
    only = args[1:] or list(all_cases)

    def show(name: str, d: dict) -> None:
        print(
            name,
            d.get("num_completed"),
            d.get("num_rejected"),
            d.get("num_preemptions"),
            d["_records"][0],
            file=sys.stderr,
        )

    out = run_cases(only, all_cases, show, series_digest=quick)
    with open(args[0], "w") as fh:
        json.dump(out, fh, indent=None if quick else 1, sort_keys=True, default=repr)
    print("wrote", args[0])


if __name__ == "__main__":
    main()
