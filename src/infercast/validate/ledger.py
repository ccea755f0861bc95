"""Step times of many (setup, batch shape) pairs under many profiles, vectorized.

A prediction needs the expected time of a few step shapes (``Shape``: runs of
``(count, new, cached)`` sequences). The per-op FLOPs and bytes of a shape do
not depend on the efficiency profile, so each shape's op ledger is taken once
from :class:`~infercast.cost.step.StepModel` and then re-timed for any profile
with numpy: the same formula as :func:`infercast.cost.roofline.op_expected_s`
(``tests/validate/test_ledger.py`` checks the two agree). This is what makes
calibration affordable: one evaluation of every shipped row takes milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.closedform.shape import Shape
from infercast.cost.efficiency import FIELD_NAMES, EfficiencyProfile
from infercast.cost.experts import ExpertPrecision
from infercast.cost.memory import plan_memory
from infercast.cost.ops import ATTENTION, COMM, GEMM
from infercast.cost.step import StepModel, tp_link
from infercast.errors import InfercastError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.engines import EnginePreset
from infercast.specs.hardware import HardwareSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision
from infercast.validate.setup import Setup, Unpredictable, engine_model

EIGHT_BIT = ("fp8", "int8", "fp4")
_KIND = {GEMM: 0, ATTENTION: 1, COMM: 3}  # everything else: 2 (elementwise, gather)


def expand(shape: Shape) -> tuple[np.ndarray, np.ndarray]:
    """(new, cached) arrays of a shape."""
    counts = [c for c, _, _ in shape]
    return (
        np.repeat([float(n) for _, n, _ in shape], counts),
        np.repeat([float(k) for _, _, k in shape], counts),
    )


def profile_matrix(profiles: Sequence[EfficiencyProfile]) -> np.ndarray:
    """[groups, fields] array of profile values in ``FIELD_NAMES`` order."""
    return np.array([[getattr(p, f) for f in FIELD_NAMES] for p in profiles], dtype=np.float64)


def setup_hardware(s: Setup) -> HardwareSpec:
    """The setup's part; a PCIe-only part (no scale-up link) uses PCIe for TP/PP traffic,
    as engines do on L40S / RTX cards (NCCL over PCIe)."""
    return tp_link(load_hardware(s.hardware), s.gpus_per_replica)


def setup_step_model(s: Setup, profile: EfficiencyProfile | None = None) -> StepModel:
    """The StepModel of a setup: its precision (and the experts' own), layout, engine limits and
    the engine's memory rule (``Setup.kv_free_fraction``, ``validate/setup.py``)."""
    model, hw = engine_model(load_model(s.model), s), setup_hardware(s)
    prec, par = (
        Precision.parse(s.weights, s.kv_cache),
        Parallelism(tp=s.tp, pp=s.pp, ep=s.ep, attn_dp=s.attn_dp),
    )
    experts = ExpertPrecision.parse(s.experts) if s.experts else None
    fraction = s.memory_fraction
    if s.kv_free_fraction:  # KV = that fraction of what weights and activations leave free
        probe = plan_memory(
            model,
            hw,
            prec,
            par,
            1.0,
            s.max_batched_tokens,
            s.max_seqs,
            experts.weight_bytes if experts else None,
        )
        used = probe.weight_bytes + probe.activation_bytes
        fraction = (used + s.kv_free_fraction * (probe.device_bytes - used)) / probe.device_bytes
    return StepModel(
        model,
        hw,
        prec,
        par,
        profile,
        memory_fraction=fraction,
        max_batched_tokens=s.max_batched_tokens,
        max_seqs=s.max_seqs,
        experts=experts,
    )


class StepModels:
    """StepModel per :class:`Setup` (default profile: only op ledgers and memory are used)."""

    def __init__(self, engine: EnginePreset | None = None) -> None:
        self._cache: dict[Setup, StepModel | str] = {}
        self.engine = (
            engine  # one preset for every row (``validate --engine``); None: each row's own
        )

    def get(self, s: Setup) -> StepModel:
        hit = self._cache.get(s)
        if hit is None:
            try:
                hit = setup_step_model(s)
            except InfercastError as exc:
                hit = str(exc)
            self._cache[s] = hit
        if isinstance(hit, str):
            raise Unpredictable(hit)
        return hit


class Ledger:
    """Op arrays of every registered shape; ``times(P)`` gives each shape's step time."""

    def __init__(self, models: StepModels):
        self.models = models
        self._index: dict[tuple[int, Setup, Shape], int] = {}
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._groups: list[int] = []
        self._layers: list[
            int
        ] = []  # decoder layers of each shape's model (EfficiencyProfile.layer_overhead_s)
        self._logits: list[int] = []  # rows that sample (EfficiencyProfile.token_overhead_s)
        self._tokens: list[int] = []  # new tokens (EfficiencyProfile.widen_step_s)
        self._frozen: tuple[np.ndarray, ...] | None = None
        self._subsets: dict[bytes, tuple[np.ndarray, ...]] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def add(self, group: int, setup: Setup, shape: Shape) -> int:
        """Register a shape for a profile group; returns its index into ``times()``."""
        key = (group, setup, shape)
        if key in self._index:
            return self._index[key]
        sm = self.models.get(setup)
        new, cached = expand(shape)
        ops = sm.step_cost(new, cached).ops
        m = sm.machine
        idx = len(self._groups)
        rows = []
        for o in ops:
            peak, dtype = m.gemm_peak_dtype(o.op)  # a routed-expert GEMM may run in its own dtype
            rows.append(
                [
                    o.op.flops,
                    o.op.bytes,
                    o.op.m_tokens,
                    o.op.link_bytes,
                    o.op.collectives,
                    _KIND.get(o.op.kind, 2),
                    m.attn_peak_flops if o.op.kind == ATTENTION else peak,
                    m.bandwidth,
                    m.link_bandwidth,
                    dtype in EIGHT_BIT,
                    idx,
                ]
            )
        cols = np.array(rows, dtype=np.float64).reshape(-1, 11)
        self._parts.append(cols)
        self._groups.append(group)
        self._layers.append(sm.model.num_layers)
        self._logits.append(len(new))
        self._tokens.append(int(new.sum()))
        self._index[key] = idx
        self._frozen = None
        self._subsets = {}
        return idx

    def _arrays(self) -> tuple[np.ndarray, ...]:
        if self._frozen is None:
            a = np.concatenate(self._parts) if self._parts else np.zeros((0, 11))
            shape_idx = a[:, 10].astype(np.int64)
            group = np.asarray(self._groups, dtype=np.int64)
            self._frozen = (
                *a[:, :10].T,
                shape_idx,
                group[shape_idx] if len(group) else shape_idx,
                group,
            )
        return self._frozen

    def _subset(self, shapes: np.ndarray) -> tuple[np.ndarray, ...]:
        """:meth:`_arrays` keeping only the ops of ``shapes`` (cached per set of shapes: a
        calibration fits one group's rows thousands of times)."""
        key = shapes.tobytes()
        hit = self._subsets.get(key)
        if hit is None:
            a = self._arrays()
            keep = np.isin(a[10], shapes)
            hit = (*(x[keep] for x in a[:12]), a[12])
            self._subsets[key] = hit
        return hit

    def times(self, params: np.ndarray, shapes: np.ndarray | None = None) -> np.ndarray:
        """Expected step time (s) of every shape; ``params`` is [groups, FIELD_NAMES].
        ``shapes``: time only these shape indices (the others are NaN)."""
        if shapes is None:
            arrays = self._arrays()
        else:
            shapes = np.unique(np.asarray(shapes, dtype=np.int64))
            arrays = self._subset(shapes)
        (
            flops,
            nbytes,
            m_tok,
            link,
            coll,
            kind,
            peak,
            bw,
            link_bw,
            eight,
            shape_idx,
            op_group,
            group,
        ) = arrays
        per_op = params[op_group]  # one gather of every field, then its columns
        f = {name: per_op[:, i] for i, name in enumerate(FIELD_NAMES)}
        gemm, attn, comm = kind == 0, kind == 1, kind == 3
        m = np.maximum(m_tok, 1e-9)
        base = np.where(eight > 0, f["gemm_compute_eff_8bit"], f["gemm_compute_eff"])
        curve = base * m / (m + f["gemm_m_half"])
        small = m <= f["gemm_small_max_tokens"]
        if small.any():  # EfficiencyProfile.gemm_eff's own curve for small products
            curve = np.where(
                small, f["gemm_small_peak_ratio"] * m / (m + f["gemm_small_m_half"]), curve
            )
        c_eff = np.where(gemm, curve, np.where(attn, f["attn_compute_eff"], f["gemm_compute_eff"]))
        b_eff = np.where(
            gemm, f["mem_bw_eff"], np.where(attn, f["attn_bw_eff"], f["elementwise_bw_eff"])
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            compute = np.where(flops > 0, flops / (peak * c_eff), 0.0)
            memory = nbytes / (bw * b_eff)
            wire = np.where(
                link > 0, link / (link_bw * f["comm_bw_eff"]) + f["comm_latency_s"] * coll, 0.0
            )
        t = np.where(comm, wire, np.maximum(compute, memory))
        per_shape = np.bincount(shape_idx, t, minlength=len(self._groups))
        layers = np.asarray(self._layers, dtype=np.float64)
        overhead = params[:, FIELD_NAMES.index("step_overhead_s")][group]
        out = (
            per_shape + overhead + params[:, FIELD_NAMES.index("layer_overhead_s")][group] * layers
        )
        per_token = params[:, FIELD_NAMES.index("token_overhead_s")][group]
        if per_token.any():  # StepModel's charge per sampling row (``_token_time``)
            out = out + per_token * np.asarray(self._logits, dtype=np.float64)
        widen = params[:, FIELD_NAMES.index("widen_step_s")][group]
        if widen.any():  # StepModel's per-step widening beyond ``widen_min_tokens``
            above = (
                np.asarray(self._tokens, dtype=np.float64)
                > (params[:, FIELD_NAMES.index("widen_min_tokens")][group])
            )
            out = out + np.where(above, widen, 0.0)
        multi = params[:, FIELD_NAMES.index("multi_token_step_s")][group]
        if multi.any():  # StepModel's layer-by-layer cost of a step of several tokens
            out = out + np.where(np.asarray(self._tokens, dtype=np.float64) > 1, multi, 0.0)
        if shapes is None:
            return out
        picked = np.full(out.size, np.nan)
        picked[shapes] = out[shapes]
        return picked
