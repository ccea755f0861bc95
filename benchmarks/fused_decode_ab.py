"""Batch-1 q4 decode: the fused step (engine/decode_step.py) against the per-product path.

One process, one model, one KV store: after a prefill of ``--context`` tokens, the
same one-token decode step is timed with the fused step off and on, alternated
``--rounds`` times (drift in a shared machine's load hits both), ``--steps`` steps
each; prints the best wall and best process-CPU ms of each (every thread's CPU), and
the largest logit difference between the two paths.

    python benchmarks/fused_decode_ab.py --weights auto --threads 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import infercast.engine.decode_step as ds
    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import SeqInput

    loaded = load(args.model, weights=args.weights)
    net = make_model(loaded, args.context + 16, "numpy", args.threads)
    if getattr(net, "fused", None) is None:
        raise SystemExit(f"no fused step for --weights {args.weights}: its layers are not q4")
    blocks = list(range(-(-(args.context + 1) // 16)))
    kv = PagedKVStore(loaded.cfg, len(blocks), 16)
    net.forward([SeqInput(list(range(1, args.context + 1)), 0, blocks)], kv)
    seq = [SeqInput([7], args.context, blocks)]
    logits = {}
    for fused in (False, True):
        ds.ENABLED = fused
        logits[fused] = net.forward(seq, kv)[0]
    diff = np.abs(logits[True] - logits[False]).max() / np.abs(logits[False]).max()
    print(f"largest logit difference, relative: {diff:.1e}")
    for _ in range(args.rounds):
        for fused in (False, True):
            ds.ENABLED = fused
            wall, cpu = [], []
            for _ in range(args.steps):
                t0, c0 = time.perf_counter(), time.process_time()
                net.forward(seq, kv)
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            name = "fused" if fused else "per-product"
            print(
                f"{args.weights} t={args.threads} {name:>11}: {min(wall) * 1e3:6.2f} ms wall, "
                f"{min(cpu) * 1e3:6.2f} ms cpu",
                flush=True,
            )


if __name__ == "__main__":
    main()
