"""Fit the cost model's efficiency factors to the engine's measured rates (:mod:`.rate_probe`).

The prediction for a timed unit is the cost model's own: the sum over its ops
of :func:`infercast.cost.roofline.op_expected_s`, i.e. ``max(FLOPs / (peak *
eff), bytes / (bandwidth * mem_eff))`` per op, with GEMM efficiency ``eff =
gemm_compute_eff * M / (M + gemm_m_half)`` (:mod:`infercast.cost.efficiency`).
The factors minimise the squared log-ratio of predicted to measured time (the
best thread CPU time of the runs: on a shared machine a wall time also counts
waits for a core), so a 10% over- and under-prediction weigh the same at every M:

1. ``gemm_small_peak_ratio``, ``gemm_small_m_half``, ``mem_bw_eff`` on the layer products
   and the LM head of up to ``qlinear.KERNEL_MAX_TOKENS`` (48) rows, where the engine runs
   each format's own kernels, and ``gemm_compute_eff`` (``gemm_compute_eff_8bit`` at an int8
   compute dtype: q4 and int8 on the integer kernels), ``gemm_m_half`` on the larger ones,
   which widen the matrix and run OpenBLAS's GEMM (or those integer kernels;
   ``gemm_small_max_tokens`` = 48: two curves, as the engine has two kernels; one curve
   through both, as until 2026-12-04, priced fp32's 128-512-token products 1.2x too dear and
   q4's 4-32-token ones 1.4-1.8x); with fewer row counts, one curve for all;
2. ``attn_bw_eff``, ``attn_compute_eff`` on the attention units;
3. ``elementwise_bw_eff`` on a prefill's elementwise work (norms, RoPE, SiLU, residual adds:
   ``rate_probe.elementwise_points``), numpy's passes over the activations, ~6 % of a
   prefill step on one core (the cost model's norm and activation ops carry it: RoPE and the
   adds have no op of their own);
4. ``step_overhead_s`` and ``layer_overhead_s``: the line through the best
   times of tiny-width steps at two depths (their own FLOPs and bytes are under
   0.1% of them), at one token (q4, int8 and bf16 layers: one compiled call); and
   ``multi_token_step_s``: what a two-request decode step at the model's depth adds to that
   line (``rate_probe.overhead_point``).

``infercast machine`` then adds the serving loop's own work (:func:`with_serving`): its
scheduling per step to ``step_overhead_s``, its sampling, detokenizing and SSE encoding per
sampled token as ``token_overhead_s``, a request's admission as ``request_admit_s``.

Other factors keep their defaults (communication does not occur on one CPU).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.roofline import Machine, op_expected_s
from infercast.engine.rate_probe import Point

GEMM_KINDS = ("gemm", "head")


@dataclass(frozen=True)
class Fit:
    """The fitted profile and, per point, the predicted time (compare with ``best_cpu_s``)."""

    profile: EfficiencyProfile
    points: tuple[Point, ...]
    predicted_s: tuple[float, ...]

    def ratios(self, kinds: Sequence[str] = GEMM_KINDS) -> list[float]:
        """measured (best CPU) / predicted for the points of ``kinds``."""
        return [
            p.best_cpu_s / t
            for p, t in zip(self.points, self.predicted_s, strict=True)
            if p.kind in kinds
        ]


def predict_s(
    point: Point, machine: Machine, profile: EfficiencyProfile, widen_layer_s: float = 0.0
) -> float:
    """The cost model's expected time of a point's ops (no per-step overhead); a GEMM pass of
    more than ``profile.widen_min_tokens`` rows adds ``widen_layer_s`` per layer it covers."""
    if point.kind in ("overhead", "overhead_multi"):
        multi = profile.multi_token_step_s if point.kind == "overhead_multi" else 0.0
        return profile.step_overhead_s + profile.layer_overhead_s * point.layers + multi
    t = sum(op_expected_s(op, machine, profile)[0] for op in point.ops)
    if (
        widen_layer_s
        and point.kind in GEMM_KINDS
        and point.ops[0].m_tokens > (profile.widen_min_tokens)
    ):
        t += widen_layer_s * point.layers
    return t


def _fit(
    points: list[Point],
    machine: Machine,
    base: EfficiencyProfile,
    names: Sequence[str],
    starts: Sequence[Sequence[float]],
    upper: Sequence[float],
    widen_layer_s: float = 0.0,
) -> EfficiencyProfile:
    """Least squares on log(predicted / measured) over ``names``, best of several starts."""
    from scipy.optimize import least_squares

    def residuals(x: np.ndarray) -> np.ndarray:
        prof = base.with_updates(**dict(zip(names, map(float, x), strict=True)))
        return np.array(
            [math.log(predict_s(p, machine, prof, widen_layer_s) / p.best_cpu_s) for p in points]
        )

    lower = [1e-3] * len(names)
    fits = [least_squares(residuals, x0, bounds=(lower, upper)) for x0 in starts]
    best = min(fits, key=lambda r: r.cost)
    return base.with_updates(**dict(zip(names, map(float, best.x), strict=True)))


def fit_profile(
    points: Sequence[Point],
    machine: Machine,
    name: str = "local-cpu",
    widen_layer_s: float = 0.0,
    num_layers: int = 0,
) -> Fit:
    """Fit the GEMM, attention and overhead factors (see the module doc) to ``points``.

    ``widen_layer_s`` (``rate_probe.widen_layer_s``, measured): the compact formats' widening
    per layer in a step of more than ``KERNEL_MAX_TOKENS`` tokens; the GEMM points above that
    are fitted with it added, and the profile charges ``num_layers`` of it a step
    (``widen_step_s``)."""
    from infercast.engine.qlinear import KERNEL_MAX_TOKENS

    prof = EfficiencyProfile(name=name, widen_min_tokens=float(KERNEL_MAX_TOKENS))
    if widen_layer_s:
        prof = prof.with_updates(widen_step_s=widen_layer_s * num_layers)
    gemms = [p for p in points if p.kind in GEMM_KINDS]
    small = [p for p in gemms if p.ops[0].m_tokens <= KERNEL_MAX_TOKENS]
    large = [p for p in gemms if p.ops[0].m_tokens > KERNEL_MAX_TOKENS]
    starts = [(0.7, mh, 0.9) for mh in (2.0, 16.0, 64.0)]
    if len(small) >= 3 and len(large) >= 2:
        # two kernels, two curves (``EfficiencyProfile.gemm_small_*``): up to KERNEL_MAX_TOKENS
        # the format's own loops and OpenBLAS's small-M path (their bandwidth too), beyond
        # it the widened matrix on OpenBLAS's GEMM
        prof = _fit(
            small,
            machine,
            prof.with_updates(gemm_small_max_tokens=float(KERNEL_MAX_TOKENS)),
            ("gemm_small_peak_ratio", "gemm_small_m_half", "mem_bw_eff"),
            starts,
            (8.0, 4096.0, 1.0),
            widen_layer_s,
        )
        prof = _fit(
            large,
            machine,
            prof,
            (_large_eff(machine), "gemm_m_half"),
            [(0.7, mh) for mh in (2.0, 16.0, 64.0)],
            (1.0, 4096.0),
            widen_layer_s,
        )
    elif gemms:
        prof = _fit(
            gemms,
            machine,
            prof,
            (_large_eff(machine), "gemm_m_half", "mem_bw_eff"),
            starts,
            (1.0, 4096.0, 1.0),
            widen_layer_s,
        )
    attn = [p for p in points if p.kind == "attention"]
    if attn:
        prof = _fit(
            attn,
            machine,
            prof,
            ("attn_bw_eff", "attn_compute_eff"),
            [(0.5, 0.5), (0.1, 0.1)],
            (1.0, 1.0),
        )
    elem = [p for p in points if p.kind == "elementwise"]
    if elem:
        prof = _fit(elem, machine, prof, ("elementwise_bw_eff",), [(0.5,), (0.05,)], (1.0,))
    prof = _fit_overhead([p for p in points if p.kind == "overhead"], prof)
    multi = [p for p in points if p.kind == "overhead_multi"]
    if multi:  # what a step of several tokens adds to the one-token line at its depth
        extra = [
            p.best_cpu_s - predict_s(replace(p, kind="overhead"), machine, prof) for p in multi
        ]
        prof = prof.with_updates(multi_token_step_s=max(0.0, float(np.mean(extra))))
    predicted = tuple(predict_s(p, machine, prof, widen_layer_s) for p in points)
    return Fit(prof, tuple(points), predicted)


def _large_eff(machine: Machine) -> str:
    """The profile field that scales a large GEMM at ``machine``'s compute dtype
    (``EfficiencyProfile.gemm_eff``: the 8-bit one for int8, as q4 and int8 prefill on the
    integer kernels is priced, ``engine/predict.py``)."""
    return (
        "gemm_compute_eff_8bit"
        if machine.compute_dtype in ("fp8", "int8", "fp4")
        else ("gemm_compute_eff")
    )


def _fit_overhead(points: list[Point], prof: EfficiencyProfile) -> EfficiencyProfile:
    """step_overhead_s + layer_overhead_s * layers through the overhead points (both >= 0)."""
    if not points:
        return prof
    layers = np.array([p.layers for p in points], dtype=float)
    best = np.array([p.best_cpu_s for p in points])
    if len(set(layers)) < 2:
        return prof.with_updates(step_overhead_s=float(best.min()), layer_overhead_s=0.0)
    slope, intercept = np.polyfit(layers, best, 1)
    if slope < 0:  # noise: one constant
        slope, intercept = 0.0, best.mean()
    elif intercept < 0:  # through the origin instead
        slope, intercept = best @ layers / (layers @ layers), 0.0
    return prof.with_updates(step_overhead_s=float(intercept), layer_overhead_s=float(slope))


def with_serving(fit: Fit, step_s: float, token_s: float, admit_s: float = 0.0) -> Fit:
    """``fit`` with the serving loop's measured work (:mod:`infercast.engine.serve_probe`): its
    per-step part added to ``step_overhead_s``, its per-token part as ``token_overhead_s``, its
    per-request admission as ``request_admit_s``. The points' predictions stay the engine-only
    fit's."""
    prof = fit.profile.with_updates(
        step_overhead_s=fit.profile.step_overhead_s + step_s,
        token_overhead_s=token_s,
        request_admit_s=admit_s,
    )
    return Fit(prof, fit.points, fit.predicted_s)


def profile_toml(
    fit: Fit, comment: str, compute: str | None = None, head_weights: str | None = None
) -> str:
    """The profile as TOML that ``--profile`` (``load_profile``) reads, with the fit's points.

    ``[profile]`` holds the factors and, when given, ``compute``: the dtype whose peak the fit
    priced the products at (``cost.profiles.profile_compute``; a simulation with the profile
    uses it by default) and ``head_weights``: the LM head's own storage dtype in the model the
    points were measured on (``cost.profiles.profile_head_weights``; the same default);
    ``[fit]`` (ignored by the loader) lists every point's label, measured (best CPU, best and
    median wall) and predicted seconds.
    """

    def num(v: float) -> str:
        return f"{float(v):.6g}"

    lines = [f"# {line}" for line in comment.splitlines()]
    lines += ["[profile]", f'name = "{fit.profile.name}"']
    if compute is not None:
        lines.append(f'compute = "{compute}"')
    if head_weights is not None:
        lines.append(f'head_weights = "{head_weights}"')
    lines += [f"{k} = {num(v)}" for k, v in fit.profile.to_dict().items() if k != "name"]
    lines += [
        "",
        "[fit]",
        "labels = [" + ", ".join(f'"{p.label}"' for p in fit.points) + "]",
        "measured_best_cpu_s = [" + ", ".join(num(p.best_cpu_s) for p in fit.points) + "]",
        "measured_best_s = [" + ", ".join(num(p.best_s) for p in fit.points) + "]",
        "measured_median_s = [" + ", ".join(num(p.median_s) for p in fit.points) + "]",
        "predicted_s = [" + ", ".join(num(t) for t in fit.predicted_s) + "]",
    ]
    return "\n".join(lines) + "\n"
