"""A batch-1 decode step at 1 and 2 threads, in parts, wall time (issue 21 item 2).

For each ``--weights`` format: ``LlamaModel.forward`` for one request's one token on
``--context`` cached tokens, with its parts timed in place (wall ms, best, 10th percentile and
median of ``--steps``): the fused layers' compiled call (engine/decode_step.py), the final norm
and head product after it, and the rest (embedding row, KV slots, Python); then the head
product alone through its kernel on 1 and on 2 threads. The variants alternate in blocks of
``--block`` steps (the first of each not counted), so a shared machine's load drift hits both;
``--rounds`` rounds of each thread count. Variants: ``old`` (the head after the fused call,
threaded by ``threads.product_threads``), ``new`` (``decode_step.HEAD_IN_STEP``: the final
norm and the head inside the fused call, split by rows between its threads).

    PYTHONPATH=$PWD/src python benchmarks/decode_threads_parts.py --weights int8,q4,auto,bf16
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

# variant: decode_step.HEAD_IN_STEP
VARIANTS = {"old": False, "new": True}


def _stats(ts: list[float]) -> str:
    """Best / 10th percentile / median, ms."""
    q = sorted(ts)
    return f"{q[0] * 1e3:6.3f}/{q[len(q) // 10] * 1e3:6.3f}/{statistics.median(q) * 1e3:6.3f}"


def _timed(cur: list, name: str, fn):
    """``fn``, its wall seconds appended to ``cur[0][name]``."""

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        out = fn(*a, **k)
        cur[0][name].append(time.perf_counter() - t0)
        return out

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="int8,q4,auto,bf16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--variants", default="old,new", help=", ".join(VARIANTS))
    ap.add_argument("--block", type=int, default=10, help="steps a variant runs in turn")
    ap.add_argument(
        "--share-rows",
        type=int,
        help="decode_step.SHARE_ROWS for this run (compiled in: give the run its own "
        "NUMBA_CACHE_DIR, numba's cache does not see a changed global)",
    )
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    import infercast.engine.decode_step as ds
    import infercast.engine.threads as th
    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import SeqInput, rms_norm

    if args.share_rows:
        ds.SHARE_ROWS = args.share_rows  # before the step compiles
    threads = [int(t) for t in args.threads.split(",")]
    variants = args.variants.split(",")
    blocks = list(range(-(-(args.context + 1) // 16)))
    print(
        f"# load {os.getloadavg()[0]:.1f}; SHARE_ROWS {ds.SHARE_ROWS}; ms wall best/p10/median "
        f"of {args.steps} steps"
    )
    for fmt in args.weights.split(","):
        loaded = load(args.model, weights=fmt)
        cfg, w = loaded.cfg, loaded.weights
        nets = {t: make_model(loaded, args.context + 2, "numpy", t) for t in threads}
        kv = PagedKVStore(cfg, len(blocks), 16)
        seq = [SeqInput([7], args.context, blocks)]
        head = w.lm_head
        h = rms_norm(np.ones((cfg.hidden_size, 1), np.float32), w.final_norm, cfg.rms_norm_eps)
        print(f"{fmt}: head {type(head).__name__} {head.shape}, {head.nbytes / 1e6:.1f} MB")
        for r in range(args.rounds):
            for t in threads:
                net = nets[t]
                parts = {v: {"fused": [], "head": [], "step": []} for v in variants}
                cur = [parts[variants[0]]]  # the dict the wrappers append to
                run, mm = net.fused.run, net._mm
                rl = getattr(net.fused, "run_logits", None)  # None: a tree before it
                net.fused.run, net._mm = _timed(cur, "fused", run), _timed(cur, "head", mm)
                if rl is not None:
                    net.fused.run_logits = _timed(cur, "fused", rl)
                try:
                    with threadpool_limits(t):
                        for _ in range(-(-args.steps // args.block)):
                            for v in variants:  # alternated, a block of steps each
                                ds.HEAD_IN_STEP = VARIANTS[v]
                                cur[0] = {k: [] for k in parts[v]}
                                for _ in range(args.block + 1):
                                    t0 = time.perf_counter()
                                    net.forward(seq, kv)
                                    cur[0]["step"].append(time.perf_counter() - t0)
                                for k, ts in cur[0].items():  # the first a warm-up
                                    parts[v][k] += ts[1:]
                finally:
                    net.fused.run, net._mm = run, mm
                    if rl is not None:
                        net.fused.run_logits = rl
                for v in variants:
                    p = parts[v]
                    heads = p["head"] or [0.0] * len(p["step"])
                    rest = [s - f - h for s, f, h in zip(p["step"], p["fused"], heads, strict=True)]
                    line = (
                        f"  r{r} t={t} {v}: step {_stats(p['step'])}  fused "
                        f"{_stats(p['fused'])}  head "
                        f"{_stats(p['head']) if p['head'] else '       (in fused)       '}"
                        f"  rest {_stats(rest)}"
                    )
                    print(line, flush=True)
            ds.HEAD_IN_STEP = VARIANTS["old"]
            alone = []
            net = nets[max(threads)]
            min_work = th.THREADED_MIN_WORK
            for ht in (1, 2):
                ts = []
                net.scratch.threads = ht
                th.THREADED_MIN_WORK = {k: 0.0 for k in min_work} if ht > 1 else min_work
                try:
                    with threadpool_limits(ht):
                        net._mm(head, h)
                        for _ in range(args.steps):
                            t0 = time.perf_counter()
                            net._mm(head, h)
                            ts.append(time.perf_counter() - t0)
                finally:
                    net.scratch.threads = max(threads)
                    th.THREADED_MIN_WORK = min_work
                alone.append(f"{ht} thread(s) {_stats(ts)}")
            print(f"  r{r} head alone: " + "  ".join(alone), flush=True)
        del nets


if __name__ == "__main__":
    main()
