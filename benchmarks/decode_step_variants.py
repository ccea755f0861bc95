"""Copies of engine/decode_step.py against each other on the whole batch-1 decode step.

Each FILE is a copy of decode_step.py, edited (a constant, a loop, a prefetch); each is
imported as its own module, so each compiles its own fused step, and ``LlamaModel.forward``
of one request's one token on ``--context`` cached ones (KV filled with random values) runs
through each variant's ``FusedDecode.run`` in turn, ``--rounds`` times, the order reversed every
other round. Prints each variant's best, 25th percentile and median process-CPU ms, the median
and quartiles of its step time over the first file's in the same round (paired: a shared
machine's slow spells hit both), and its largest logit difference from the first file's.
A variant must keep ``FusedDecode``'s attributes (the model's instance is the real module's).

Numba's disk cache could not load these modules' functions back in a new process (its index
names the module, which is not importable by name), so this runs on a fresh cache directory
and compiles everything (~30 s a variant here).

    python benchmarks/decode_step_variants.py --weights bf16 --rounds 40 \\
        src/infercast/engine/decode_step.py /tmp/variant.py
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="copies of engine/decode_step.py")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="bf16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="decode_step_variants_")

    from threadpoolctl import threadpool_limits

    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import SeqInput

    runs = []
    for i, path in enumerate(args.files):
        spec = importlib.util.spec_from_file_location(f"infercast.engine._variant{i}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        runs.append(mod.FusedDecode.run)
    loaded = load(args.model, weights=args.weights)
    cfg, ctx = loaded.cfg, args.context
    net = make_model(loaded, ctx + 2, "numpy", args.threads)
    if getattr(net, "fused", None) is None:
        raise SystemExit(f"no fused step for --weights {args.weights}")
    blocks = list(range(-(-(ctx + 1) // 16)))
    kv = PagedKVStore(cfg, len(blocks), 16)
    rng = np.random.default_rng(0)
    for a in (kv.k_all, kv.v_all):
        a[:] = rng.standard_normal(a.shape).astype(np.float32) * 0.5
    seq = [SeqInput([7], ctx, blocks)]
    fused = type(net.fused)
    logits, ms = [], np.zeros((args.rounds, len(runs)))
    with threadpool_limits(args.threads):
        for run in runs:  # compile, and each variant's logits
            fused.run = run
            logits.append(net.forward(seq, kv)[0])
        for r in range(args.rounds):
            order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
            for i in order:
                fused.run = runs[i]
                c0 = time.process_time()
                net.forward(seq, kv)
                ms[r, i] = (time.process_time() - c0) * 1e3
    for i, path in enumerate(args.files):
        t, ratio = ms[:, i], ms[:, i] / ms[:, 0]
        q1, q2, q3 = np.percentile(ratio, [25, 50, 75])
        print(
            f"{os.path.basename(path):>24}: best {t.min():.2f} p25 {np.percentile(t, 25):.2f} "
            f"median {np.median(t):.2f} ms; over the first: median {q2:.3f} [{q1:.3f}, "
            f"{q3:.3f}]; largest logit difference {np.abs(logits[i] - logits[0]).max():.1e}"
        )


if __name__ == "__main__":
    main()
