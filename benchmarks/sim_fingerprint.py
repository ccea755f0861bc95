"""Bit-exact fingerprint of 21 simulations, to prove a speed change altered no result.

Each case's summary (wall/CPU time removed), time series, segment count and a
SHA-256 over the repr of every RequestRecord go into one JSON file. Run it on
the old code and the new, and compare the files byte for byte:

    git archive HEAD src | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base/src python benchmarks/sim_fingerprint.py /tmp/base.json
    python benchmarks/sim_fingerprint.py /tmp/new.json && cmp /tmp/base.json /tmp/new.json && echo IDENTICAL

Cases: the three policies in fast and exact mode; offline (fast and exact) and
closed loop; KV-scarce runs with preemptions; prefix caching with and without
scarcity; the code trace; 3 replicas; a small scheduler; rejections by
max_model_len and by KV; gamma arrivals; and the 50k-request speed benchmark.
About a minute of CPU. ``python benchmarks/sim_fingerprint.py OUT.json NAME...`` runs only those cases.
"""

from __future__ import annotations

import hashlib
import json
import sys

from infercast.commands.simulate import build_step_model
from infercast.sim.config import build_config
from infercast.sim.run import simulate

BASE = {"model": "llama-3.1-8b", "hardware": "h100-sxm"}


def cfg(policy="chunked", mode="fast", n=3000, rate=16.0, trace="azure-conv", extra_wl=None, sched=None,
        seed=3, **kw):
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
    c["prefix"] = cfg(n=2000, extra_wl={"prefix_groups": 4, "prefix_tokens": 2000}, sched={"prefix_caching": True})
    c["prefix-scarce"] = cfg(n=1500, rate=30, extra_wl={"prefix_groups": 8, "prefix_tokens": 1000},
                             sched={"prefix_caching": True, "num_blocks": 1200})
    c["code"] = cfg(n=2000, trace="azure-code", rate=4.0)
    c["replicas"] = cfg(n=3000, rate=40.0, replicas=3)
    c["small-seqs"] = cfg(n=2000, rate=20.0, sched={"max_num_seqs": 16, "max_num_batched_tokens": 512})
    c["rej-mml"] = cfg(n=3000, trace="azure-code", rate=6.0, seed=5, sched={"max_model_len": 1500})
    c["rej-kv"] = cfg(n=2000, trace="azure-code", rate=3.0, seed=6, sched={"num_blocks": 150})
    c["gamma"] = cfg(n=3000, rate=12.0, seed=7, extra_wl={"arrival": "gamma", "cv": 3.0})
    c["big50k"] = cfg(n=50000, rate=16.35)
    return c


def fingerprint(c, model) -> dict:
    h, count = hashlib.sha256(), [0]

    def sink(rec) -> None:
        count[0] += 1
        h.update(repr(rec).encode())

    r = simulate(c, model, sink=sink)
    d = r.to_dict()
    for k in ("sim_wall_s", "sim_cpu_s"):
        d.pop(k, None)
    d["_series"] = {k: v.tolist() for k, v in r.series.arrays().items()}
    d["_seg"] = getattr(r, "num_segments", None)
    d["_records"] = (count[0], h.hexdigest())
    return d


def main() -> None:
    all_cases = cases()
    only = sys.argv[2:] or list(all_cases)
    model = build_step_model(cfg())
    out = {}
    for name in only:
        out[name] = d = fingerprint(all_cases[name], model)
        print(name, d.get("num_completed"), d.get("num_rejected"), d.get("num_preemptions"), d["_records"][0],
              file=sys.stderr)
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True, default=repr)
    print("wrote", sys.argv[1])


if __name__ == "__main__":
    main()
