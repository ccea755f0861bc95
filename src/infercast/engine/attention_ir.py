"""Decode attention's two products as LLVM vector code: q K^T and p V for one KV head.

The fused decode step (:mod:`infercast.engine.decode_step`) attends one token per layer over the
paged K/V (Vaswani et al. 2017, eq. 1: softmax(q K^T / sqrt(d)) V; the KV head's g query heads
share each K and V row, Ainslie et al. 2023). Written as numba loops, the V product kept each
query row's accumulator in memory (a load and a store per row, key and 16 lanes) and each score
ended in a horizontal sum of its own: SmolLM2-135M's 30 layers took ~0.19 ms a step with the
K/V in cache. Here each is an ``@intrinsic`` of plain LLVM vector IR (``<16 x float>``,
``llvm.fma``; no x86 intrinsics, so any CPU: LLVM splits the vectors for AVX2): a tile of up to
4 query rows times the head's vectors stays in registers across the keys (head sizes 16, 32,
48, 64, 96 and 128 unrolled; others a row and a vector at a time), each K and V row is loaded
once per tile, and four keys' scores are summed in one interleaved reduction. Same sums in
another order: equal to float32 rounding (tests/engine/test_attention_ir.py).

Both read rows ``x.flat[base + slots[j] * stride:][:hd]`` of a C-contiguous float32 array, so
the caller passes its layer's and head's offset and the row stride of the paged store.
"""

from __future__ import annotations

from functools import cache

VW = 16  # floats a vector
MAX_TILE = 16  # accumulator vectors of one unrolled tile (query rows x vectors of a row)
TILE_NC = (1, 2, 3, 4, 6, 8)  # vectors a row (head size / 16) with unrolled tiles


def source_digest() -> str:
    """A digest of this file: part of the disk-cache file names of the compiled functions that
    take its code in (numba checks only their own file's stamp, ``numba/core/caching.py``)."""
    import hashlib
    from pathlib import Path

    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


@cache
def intrinsics():
    """(attn_scores, attn_pv), numba intrinsics (see the module doc); needs numba."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
    v_f32 = ir.VectorType(f32, VW)
    zero = ir.Constant(v_f32, [0.0] * VW)

    def const(v):
        return ir.Constant(i64, v)

    def shuf(builder, a, b, idx):
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, len(idx)), idx))

    def reduce1(builder, v):
        """The sum of a vector's lanes (halves added pairwise)."""
        n = VW
        while n > 1:
            n //= 2
            v = builder.fadd(
                shuf(builder, v, v, list(range(n))), shuf(builder, v, v, list(range(n, 2 * n)))
            )
        return builder.extract_element(v, ir.Constant(i32, 0))

    def reduce4(builder, vs):
        """The lane sums of four vectors as one <4 x float>: the four reductions interleaved,
        so that each shuffle and add serves two or four of them."""
        h, q = VW // 2, VW // 4
        t = [
            builder.fadd(
                shuf(builder, a, b, list(range(h)) + list(range(VW, VW + h))),
                shuf(builder, a, b, list(range(h, VW)) + list(range(VW + h, 2 * VW))),
            )
            for a, b in ((vs[0], vs[1]), (vs[2], vs[3]))
        ]  # [v0's 8 | v1's 8], [v2's 8 | v3's 8]
        lo = [i for k in range(4) for i in range(k * h, k * h + q)]
        u = builder.fadd(
            shuf(builder, t[0], t[1], lo), shuf(builder, t[0], t[1], [i + q for i in lo])
        )  # [v0's 4 | v1's 4 | v2's 4 | v3's 4]
        x = builder.fadd(
            shuf(builder, u, u, [i for k in range(4) for i in (4 * k, 4 * k + 1)]),
            shuf(builder, u, u, [i for k in range(4) for i in (4 * k + 2, 4 * k + 3)]),
        )  # [v0's 2 | v1's 2 | v2's 2 | v3's 2]
        return builder.fadd(shuf(builder, x, x, [0, 2, 4, 6]), shuf(builder, x, x, [1, 3, 5, 7]))

    def splat(builder, val):
        v = builder.insert_element(ir.Constant(v_f32, ir.Undefined), val, ir.Constant(i32, 0))
        return shuf(builder, v, v, [0] * VW)

    def vptr(builder, ptr, off, vt=v_f32):
        return builder.bitcast(builder.gep(ptr, [off]), vt.as_pointer())

    def fma_fn(builder):
        return cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(v_f32, [v_f32] * 3), f"llvm.fma.v{VW}f32"
        )

    def tiles(builder, g, nc, emit):
        """emit(first row, rows, vectors a row) over tiles covering the g rows: unrolled
        tiles where nc (runtime) is in TILE_NC, else emit(row, 1, None) per row."""
        fn = builder.function
        done = fn.append_basic_block("tiles.done")
        generic = fn.append_basic_block("tiles.generic")
        sw = builder.switch(nc, generic)
        for ncv in TILE_NC:
            bb = fn.append_basic_block(f"tiles.nc{ncv}")
            sw.add_case(const(ncv), bb)
            builder.position_at_end(bb)
            rows = max(1, min(4, MAX_TILE // ncv))
            full = builder.udiv(g, const(rows))
            with cgutils.for_range(builder, full) as lt:
                emit(builder.mul(lt.index, const(rows)), rows, ncv)
            rest = builder.sub(g, builder.mul(full, const(rows)))
            for r in range(1, rows):
                with builder.if_then(builder.icmp_unsigned("==", rest, const(r))):
                    emit(builder.mul(full, const(rows)), r, ncv)
            builder.branch(done)
        builder.position_at_end(generic)
        with cgutils.for_range(builder, g) as lr:
            emit(lr.index, 1, None)
        builder.branch(done)
        builder.position_at_end(done)

    def unpack(context, builder, sig, args):
        arrs = [context.make_array(sig.args[i])(context, builder, args[i]) for i in (0, 1, 4, 7)]
        return (*arrs, args[2], args[3], args[5], args[6])

    def typed(a, kv, slots, out):
        arrays = (a, kv, out)
        ok = all(isinstance(t, types.Array) and t.dtype == types.float32 for t in arrays)
        ok = ok and all(t.layout == "C" for t in arrays) and a.ndim == out.ndim == 2
        ok = ok and isinstance(slots, types.Array) and slots.layout == "C"
        return ok and slots.dtype == types.int64 and slots.ndim == 1

    @intrinsic
    def attn_scores(typingctx, q, k, base, stride, slots, q0, g, scores):
        """scores[i, j] = q[i] . k.flat[base + slots[j] stride:][:hd] for i in q0..q0+g-1
        (q [nq, hd], hd % 16 == 0; scores [nq, len(slots)])."""
        if not typed(q, k, slots, scores):
            return None

        def codegen(context, builder, sig, args):
            qa, ka, sa, oa, base, stride, q0, g = unpack(context, builder, sig, args)
            n = cgutils.unpack_tuple(builder, sa.shape)[0]
            hd = cgutils.unpack_tuple(builder, qa.shape)[1]
            nc = builder.udiv(hd, const(VW))
            fma = fma_fn(builder)

            def krow(j):
                sj = builder.load(builder.gep(sa.data, [j]))
                return builder.add(base, builder.mul(sj, stride))

            def store(row, j, val):
                builder.store(val, builder.gep(oa.data, [builder.add(builder.mul(row, n), j)]))

            def emit(first, rows, ncv):
                q_rows = [builder.add(q0, builder.add(first, const(r))) for r in range(rows)]
                if ncv is None:  # one row, a vector at a time
                    acc = cgutils.alloca_once_value(builder, zero)
                    with cgutils.for_range(builder, n) as lj:
                        koff = krow(lj.index)
                        builder.store(zero, acc)
                        with cgutils.for_range(builder, nc) as lc:
                            co = builder.mul(lc.index, const(VW))
                            qoff = builder.add(builder.mul(q_rows[0], hd), co)
                            qv = builder.load(vptr(builder, qa.data, qoff), align=4)
                            kv = builder.load(
                                vptr(builder, ka.data, builder.add(koff, co)), align=4
                            )
                            builder.store(builder.call(fma, [qv, kv, builder.load(acc)]), acc)
                        store(q_rows[0], lj.index, reduce1(builder, builder.load(acc)))
                    return
                qv = [
                    [
                        builder.load(
                            vptr(builder, qa.data, builder.add(builder.mul(r, hd), const(c * VW))),
                            align=4,
                        )
                        for c in range(ncv)
                    ]
                    for r in q_rows
                ]

                def dots(j):  # each tile row's lane products with key j's row
                    koff = krow(j)
                    kv = [
                        builder.load(
                            vptr(builder, ka.data, builder.add(koff, const(c * VW))), align=4
                        )
                        for c in range(ncv)
                    ]
                    out = []
                    for r in range(rows):
                        acc = builder.fmul(qv[r][0], kv[0])
                        for c in range(1, ncv):
                            acc = builder.call(fma, [qv[r][c], kv[c], acc])
                        out.append(acc)
                    return out

                n4 = builder.udiv(n, const(4))
                with cgutils.for_range(builder, n4) as lj:
                    j0 = builder.mul(lj.index, const(4))
                    keys = [dots(builder.add(j0, const(u))) for u in range(4)]
                    for r, row in enumerate(q_rows):
                        s4 = reduce4(builder, [keys[u][r] for u in range(4)])
                        dst = builder.add(builder.mul(row, n), j0)
                        builder.store(s4, vptr(builder, oa.data, dst, s4.type), align=4)
                with cgutils.for_range(builder, builder.sub(n, builder.mul(n4, const(4)))) as lt:
                    j = builder.add(builder.mul(n4, const(4)), lt.index)
                    for row, acc in zip(q_rows, dots(j), strict=True):
                        store(row, j, reduce1(builder, acc))

            tiles(builder, g, nc, emit)
            return context.get_dummy_value()

        return types.none(
            q, k, types.int64, types.int64, slots, types.int64, types.int64, scores
        ), codegen

    @intrinsic
    def attn_pv(typingctx, p, v, base, stride, slots, q0, g, out):
        """out[i, :] = sum_j p[i, j] v.flat[base + slots[j] stride:][:hd] for i in q0..q0+g-1
        (p [nq, len(slots)]; out [nq, hd], hd % 16 == 0)."""
        if not typed(p, v, slots, out):
            return None

        def codegen(context, builder, sig, args):
            pa, va, sa, oa, base, stride, q0, g = unpack(context, builder, sig, args)
            n = cgutils.unpack_tuple(builder, sa.shape)[0]
            hd = cgutils.unpack_tuple(builder, oa.shape)[1]
            nc = builder.udiv(hd, const(VW))
            fma = fma_fn(builder)

            def vrow(j):
                sj = builder.load(builder.gep(sa.data, [j]))
                return builder.add(base, builder.mul(sj, stride))

            def pval(row, j):
                p_ij = builder.load(builder.gep(pa.data, [builder.add(builder.mul(row, n), j)]))
                return splat(builder, p_ij)

            def emit(first, rows, ncv):
                q_rows = [builder.add(q0, builder.add(first, const(r))) for r in range(rows)]
                if ncv is None:  # one row, a vector at a time
                    acc = cgutils.alloca_once_value(builder, zero)
                    with cgutils.for_range(builder, nc) as lc:
                        co = builder.mul(lc.index, const(VW))
                        builder.store(zero, acc)
                        with cgutils.for_range(builder, n) as lj:
                            vv = builder.load(
                                vptr(builder, va.data, builder.add(vrow(lj.index), co)), align=4
                            )
                            pj = pval(q_rows[0], lj.index)
                            builder.store(builder.call(fma, [pj, vv, builder.load(acc)]), acc)
                        dst = builder.add(builder.mul(q_rows[0], hd), co)
                        builder.store(builder.load(acc), vptr(builder, oa.data, dst), align=4)
                    return
                accs = [
                    [cgutils.alloca_once_value(builder, zero) for _ in range(ncv)] for _ in q_rows
                ]
                for row in accs:
                    for a in row:
                        builder.store(zero, a)
                with cgutils.for_range(builder, n) as lj:
                    voff = vrow(lj.index)
                    vv = [
                        builder.load(
                            vptr(builder, va.data, builder.add(voff, const(c * VW))), align=4
                        )
                        for c in range(ncv)
                    ]
                    for r, row in enumerate(q_rows):
                        pj = pval(row, lj.index)
                        for c in range(ncv):
                            a = accs[r][c]
                            builder.store(builder.call(fma, [pj, vv[c], builder.load(a)]), a)
                for r, row in enumerate(q_rows):
                    for c in range(ncv):
                        dst = builder.add(builder.mul(row, hd), const(c * VW))
                        builder.store(
                            builder.load(accs[r][c]), vptr(builder, oa.data, dst), align=4
                        )

            tiles(builder, g, nc, emit)
            return context.get_dummy_value()

        return types.none(
            p, v, types.int64, types.int64, slots, types.int64, types.int64, out
        ), codegen

    return attn_scores, attn_pv
