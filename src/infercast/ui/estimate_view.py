"""The Estimate and Compare views: one form -> ``infercast.estimate.estimate`` -> chart data.

``estimate_payload`` makes two library calls: the configuration at the chosen
batch (its ``to_dict()`` is byte for byte what ``infercast estimate --batch B
--json`` prints, so the page, its download and the CLI agree), and the same
configuration over a batch grid for the throughput/TPOT curve. Everything drawn
is a field of those two results; nothing here computes a time, a rate or a cost.
"""

from __future__ import annotations

import shlex
import threading
from collections import OrderedDict
from typing import Any

from infercast.errors import ConfigError
from infercast.estimate import Estimate, estimate
from infercast.specs.parallel import Parallelism
from infercast.ui.inputs import (
    CUSTOM,
    EstimateForm,
    FieldError,
    check_dtype,
    load_hardware_input,
    load_model_input,
    profile_for,
)

GRID_MIN = (
    1024  # the curve spans at least batches 1..1024 (past the weights -> KV -> compute turns)
)
GRID_MAX = 65536


def build_estimate(form: EstimateForm, batches: list[int] | None = None) -> Estimate:
    """The library call ``infercast estimate`` makes for this form (at ``batches``, default the
    form's)."""
    model = load_model_input(form.model, form.model_config_json)
    hw = load_hardware_input(form.hardware, form.hardware_spec)
    weights = check_dtype(form.weights, "weights", allow=("checkpoint",))
    kv = check_dtype(form.kv_cache, "kv_cache") if form.kv_cache else None
    compute = check_dtype(form.compute, "compute") if form.compute else None
    try:
        par = Parallelism(tp=form.tp, pp=form.pp, ep=form.ep)
    except ConfigError as exc:  # e.g. --ep larger than tp*pp
        raise FieldError(str(exc), "ep") from None
    profile = profile_for(form.profile, form.engine, hw.key)

    def run(fraction: float | None):
        args = (
            model,
            hw,
            weights,
            kv,
            compute,
            batches or [form.batch],
            form.context,
            form.prompt,
            par,
            profile,
            form.price,
        )
        return estimate(*args) if fraction is None else estimate(*args, fraction)

    if not form.engine:
        return run(None)
    # as `infercast estimate --engine`: the preset's memory rule on this model and part
    from infercast.sim.build import engine_memory_fraction
    from infercast.specs.engines import load_engine

    return run(engine_memory_fraction(load_engine(form.engine), run(1.0).step_model))


def batch_grid(max_batch: int, batch: int) -> list[int]:
    """Powers of two from 1 to past both the memory wall and the chosen batch."""
    top = max(GRID_MIN, 4 * max_batch, 2 * batch)
    grid, b = [], 1
    while b <= min(top, GRID_MAX):
        grid.append(b)
        b *= 2
    return sorted(set(grid + [batch] + ([max_batch] if 0 < max_batch <= GRID_MAX else [])))


def _ops(cost) -> list[dict[str, Any]]:
    """The step's ops placed on the roofline: intensity and achieved (expected) FLOP/s per op."""
    out = []
    for o in cost.ops:
        if o.op.flops <= 0 or o.op.kind == "comm" or o.time_s <= 0:
            continue
        out.append(
            {
                "name": o.op.name,
                "kind": o.op.kind,
                "intensity": o.op.intensity,
                "flops_per_s": o.op.flops / o.time_s,
                "floor_s": o.floor_s,
                "time_s": o.time_s,
                "bound": o.bound,
            }
        )
    return out


def regime(cost) -> str:
    """What binds a decode step, in the words of the batch chart: weights, KV, compute or link.

    A memory-bound step is "weights" when its GEMMs (streaming the weights) take more of the
    expected time than attention (streaming the KV cache), else "KV"."""
    bound = cost.bound
    if bound != "memory":
        return bound
    kinds = cost.time_by_kind()
    return "weights" if kinds.get("gemm", 0.0) >= kinds.get("attention", 0.0) else "KV"


def _curve_point(d) -> dict[str, Any]:
    # floor throughput as report/plots.py draws it: the batch over the floor step time
    return {
        **d.to_dict(),
        "floor_tokens_per_s": d.batch / d.floor_step_time_s,
        "regime": regime(d.cost),
        "time_by_kind_s": d.cost.time_by_kind(),
    }


def command_line(form: EstimateForm) -> str:
    """The ``infercast estimate`` command that prints this form's JSON."""
    model = "config.json" if form.model == CUSTOM else form.model
    hw = "my-part.toml" if form.hardware == CUSTOM else form.hardware
    args = ["infercast", "estimate", "--model", model, "--hardware", hw, "--weights", form.weights]
    if form.kv_cache:
        args += ["--kv-cache", form.kv_cache]
    if form.compute:
        args += ["--compute", form.compute]
    for flag, value in (("--tp", form.tp), ("--pp", form.pp), ("--ep", form.ep)):
        if value != 1:
            args += [flag, str(value)]
    args += [
        "--prompt",
        str(form.prompt),
        "--context",
        str(form.context),
        "--batch",
        str(form.batch),
    ]
    args += ["--profile", form.profile]  # always: the CLI's default profile may change
    if form.engine:
        args += ["--engine", form.engine]
    if form.price is not None:
        args += ["--price", f"{form.price:g}"]
    return shlex.join(args + ["--json"])


class CurveCache:
    """The last few batch curves, keyed by the form without its batch and by the grid.

    Moving only the batch slider then costs one ``estimate()`` call instead of two (the
    curve does not depend on the chosen batch, except through the grid's extent)."""

    def __init__(self, size: int = 64):
        self.size, self._items = size, OrderedDict()
        self._lock = threading.Lock()

    def get(self, form: EstimateForm, grid: list[int]) -> list[dict[str, Any]]:
        key = (form.model_copy(update={"batch": 1}), tuple(grid))
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        curve = [_curve_point(d) for d in build_estimate(form, grid).decode]
        with self._lock:
            self._items[key] = curve
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return curve


def estimate_payload(form: EstimateForm, cache: CurveCache | None = None) -> dict[str, Any]:
    """Everything the Estimate view draws, from two ``estimate()`` calls (one when ``cache`` has
    the curve)."""
    est = build_estimate(form)
    result = est.to_dict()
    point = est.decode[-1]
    grid = batch_grid(result["memory"]["max_batch"], form.batch)
    curve = (cache or CurveCache()).get(form, grid)
    mach = est.step_model.machine
    return {
        "result": result,
        "command": command_line(form),
        "regime": regime(point.cost),
        "curve": curve,
        "roofline": {
            "peak_flops_per_s": mach.peak_flops,
            "attn_peak_flops_per_s": mach.attn_peak_flops,
            "bandwidth_bytes_per_s": mach.bandwidth,
            "compute_dtype": mach.compute_dtype,
            "ridge_flop_per_byte": mach.peak_flops / mach.bandwidth if mach.bandwidth else None,
            "prefill_ops": _ops(est.prefill),
            "decode_ops": _ops(point.cost),
        },
    }
