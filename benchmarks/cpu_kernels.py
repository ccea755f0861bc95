"""Candidate CPU kernels for the engine's weight products, on SmolLM2-135M's shapes.

For each candidate, one decode step's chain of layer products (per layer: QKV
960x576, O 576x576, gate/up 3072x576, down 576x1536; 30 layers, so the weights
come from DRAM as in a step) at M = 1 and 8 tokens, and the 512-token prefill
product of gate/up (compute-bound). Prints ms per chain (best process CPU time,
one thread), weights/s and the bytes/s of the format's stream, next to the floor
at ``--bandwidth-gbs``.

Candidates: numpy float32 (OpenBLAS); torch bf16 matmul; torch weight-only int8
(``_weight_int8pack_mm``, bf16 activations); torch dynamic int8 (fbgemm
``quantized::linear_dynamic``: int8 weights and activations, fp32 out); torch
int4 (``_weight_int4pack_mm_for_cpu``, groups of 32, bf16 activations); the
engine's numba loops over int8 and bf16 rows and over 4-bit groups of 32 laid out
across 64-row blocks (``engine/decode_jit.py``, float32 activations; q4 with float32
scale and offset per group), and its integer q4 and int8 kernels (activations quantized to
int8 groups, fp16 scale and offset; int8: two 8-bit planes a token; each variant this CPU
runs: VNNI, AVX-512BW, AVX2).
Dequantization accuracy is not compared here (tests/engine/test_qlinear.py and
test_decode_jit.py do that for the engine's kernels).

    python benchmarks/cpu_kernels.py --runs 7
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536))  # (out, in) per layer
LAYERS = 30


def _best_cpu(fn, runs: int) -> float:
    fn()
    best = float("inf")
    for _ in range(runs):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def candidates(torch):
    """name -> (bytes per weight, make(w fp32 [N, K]) -> f(x fp32 [M, K]))."""
    gs = 32

    def f32(w):
        return lambda x: w @ x.T

    def bf16(w):
        wt = torch.from_numpy(w).to(torch.bfloat16)
        return lambda x: torch.from_numpy(x).to(torch.bfloat16) @ wt.T

    def int8_wo(w):
        s = np.abs(w).max(axis=1) / 127
        q = torch.from_numpy(np.round(w / s[:, None]).astype(np.int8))
        st = torch.from_numpy(s.astype(np.float32)).to(torch.bfloat16)
        op = torch.ops.aten._weight_int8pack_mm
        return lambda x: op(torch.from_numpy(x).to(torch.bfloat16), q, st)

    def int8_dyn(w):
        scales = torch.from_numpy((np.abs(w).max(axis=1) / 127).astype(np.float64))
        qw = torch.quantize_per_channel(
            torch.from_numpy(w), scales, torch.zeros(len(scales), dtype=torch.int64), 0, torch.qint8
        )
        packed = torch.ops.quantized.linear_prepack(qw, None)
        op = torch.ops.quantized.linear_dynamic
        return lambda x: op(torch.from_numpy(x), packed, True)

    def int4(w):
        n, k = w.shape
        g = w.reshape(n, k // gs, gs)
        lo, hi = g.min(axis=2), g.max(axis=2)
        scale = np.maximum(hi - lo, 1e-8) / 15
        q = np.clip(np.round((g - lo[..., None]) / scale[..., None]), 0, 15).astype(np.int32)
        zero = lo + 8 * scale  # w = (q - 8) * scale + zero
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
            torch.from_numpy(q.reshape(n, k)), 1
        )
        sz = torch.from_numpy(np.stack([scale.T, zero.T], axis=-1).astype(np.float32))
        sz = sz.to(torch.bfloat16).contiguous()
        op = torch.ops.aten._weight_int4pack_mm_for_cpu
        return lambda x: op(torch.from_numpy(x).to(torch.bfloat16), packed, gs, sz)

    from infercast.engine.decode_jit import kernels

    jit = kernels()

    def numba_int8(w):
        s = (np.abs(w).max(axis=1) / 127).astype(np.float32)
        q = np.round(w / s[:, None]).astype(np.int8)

        def f(x):
            out = np.empty((q.shape[0], x.shape[0]), dtype=np.float32)
            jit.int8_matmul(q, s, x, out)
            return out

        return f

    def numba_bf16(w):
        bits = torch.from_numpy(w).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)

        def f(x):
            out = np.empty((bits.shape[0], x.shape[0]), dtype=np.float32)
            jit.bf16_matmul(bits, x, out)
            return out

        return f

    def numba_q4(w):
        from infercast.engine.decode_jit import q4_float_layout
        from infercast.engine.qformats import quantize_q4

        rows = quantize_q4(w)
        layout = q4_float_layout(rows.q, rows.scale, rows.zero - 8 * rows.scale)

        def f(x):
            out = np.empty((layout[0].shape[0] * layout[0].shape[3], x.shape[0]), np.float32)
            jit.q4_matmul(*layout, x, out, 1)
            return out

        return f

    def numba_q4_int(isa):
        from infercast.engine.decode_jit import Q4_ROWS, q4_int_kernels, q4_int_layout
        from infercast.engine.qformats import quantize_q4

        kernel = q4_int_kernels(isa)[0]

        def make(w):
            rows = quantize_q4(w)
            qv = q4_int_layout(rows.q, rows.scale, rows.zero - 8 * rows.scale)

            def f(x):
                out = np.empty((qv.shape[0] * Q4_ROWS, x.shape[0]), np.float32)
                kernel(qv, x, out, 1)
                return out

            return f

        return make

    def numba_int8_int(isa):
        from infercast.engine.decode_jit import int8_int_kernels
        from infercast.engine.qformats import quantize_int8_rows

        kernel = int8_int_kernels(isa)[0]

        def make(w):
            q, s = quantize_int8_rows(w)
            ws = q.sum(axis=1, dtype=np.int32)

            def f(x):
                out = np.empty((q.shape[0], x.shape[0]), dtype=np.float32)
                kernel(q, ws, s, x, out, 1)
                return out

            return f

        return make

    from infercast.engine.decode_jit import Q4_ISAS, q4_isa

    # the integer q4 kernel's variants this CPU runs (q4_isa's and the narrower ones after it)
    isas = Q4_ISAS[Q4_ISAS.index(q4_isa()) :] if q4_isa() else ()
    q4_int = {
        f"numba q4 x int8 groups, {isa} (engine's)": (0.5 + 4 / 32, numba_q4_int(isa))
        for isa in isas
    }
    int8_int = {
        f"numba int8 x two 8-bit planes, {isa} (engine's)": (1.0 + 8 / 576, numba_int8_int(isa))
        for isa in isas
    }

    return {
        "numpy fp32 (OpenBLAS)": (4.0, f32),
        "torch bf16": (2.0, bf16),
        "torch int8 weight-only": (1.0 + 2 / 576, int8_wo),
        "torch int8 dynamic (fbgemm)": (1.0 + 4 / 576, int8_dyn),
        "torch int4 (groups of 32)": (0.5 + 4 / 32, int4),
        "numba int8 rows (engine's float loop)": (1.0 + 4 / 576, numba_int8),
        **int8_int,
        "numba bf16 rows (engine's kernel)": (2.0, numba_bf16),
        "numba q4 groups (engine's float kernel)": (0.5 + 8 / 32, numba_q4),
        **q4_int,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--bandwidth-gbs", type=float, default=25.0)
    ap.add_argument("--only", default="", help="comma-separated name prefixes")
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    mats = [
        [rng.uniform(-0.05, 0.05, shape).astype(np.float32) for shape in SHAPES]
        for _ in range(LAYERS)
    ]
    weights = LAYERS * sum(n * k for n, k in SHAPES)
    print(f"{weights / 1e6:.0f} M weights per chain; floor at {args.bandwidth_gbs} GB/s")
    print("| kernel | B/weight | M=1 ms | Gw/s | GB/s | floor frac | M=8 ms | 512 rows GFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with threadpool_limits(1):
        for name, (bpw, make) in candidates(torch).items():
            if args.only and not any(name.startswith(p) for p in args.only.split(",")):
                continue
            fns = [[make(w) for w in layer] for layer in mats]
            row = []
            for m in (1, 8):
                xs = [rng.standard_normal((m, k), dtype=np.float32) for _, k in SHAPES]

                def chain(fns=fns, xs=xs):
                    for layer in fns:
                        for f, x in zip(layer, xs, strict=True):
                            f(x)

                row.append(_best_cpu(chain, args.runs))
            xp = rng.standard_normal((512, 576), dtype=np.float32)
            big = fns[0][2]
            t512 = _best_cpu(lambda big=big, xp=xp: big(xp), max(2, args.runs // 2))
            floor = weights * bpw / (args.bandwidth_gbs * 1e9)
            print(
                f"| {name} | {bpw:.3f} | {row[0] * 1e3:.1f} | {weights / row[0] / 1e9:.1f} | "
                f"{weights * bpw / row[0] / 1e9:.1f} | {floor / row[0]:.2f} | "
                f"{row[1] * 1e3:.1f} | {2 * 512 * 3072 * 576 / t512 / 1e9:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
