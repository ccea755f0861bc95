"""The Plan view: SLO and rate in -> ``infercast.plan.plan`` -> the cheapest configuration out.

The page gets ``Plan.to_dict()`` (what ``infercast plan --json`` prints: the best
option, the runners-up with why each lost, or the closest miss), the plan's
Pareto points and frontier (``plan.pareto``), and the command line.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from infercast.errors import InfercastError
from infercast.ui.inputs import FieldError, Form, check_dtype


class PlanForm(Form):
    """The Plan view's inputs (a subset of ``infercast plan``'s flags)."""

    model: str = "llama-3.1-8b"
    hardware: str = "h100-sxm,h200-sxm"  # candidate parts, comma-separated
    rate: float = Field(5.0, gt=0, le=1e5)
    slo_ttft_p99: float = Field(1.0, gt=0)
    slo_tpot_p99: float = Field(0.05, gt=0)
    lengths: Literal["fixed", "trace"] = "fixed"
    trace: Literal["azure-conv", "azure-code"] = "azure-conv"
    input_tokens: int = Field(1024, ge=1, le=1_000_000)
    output_tokens: int = Field(256, ge=1, le=1_000_000)
    tp: str = "1,2"
    precision: str = "bf16/bf16,fp8/fp8"
    speculative: bool = False
    disaggregation: bool = False
    num_requests: int = Field(200, ge=10, le=5000)
    seed: int = Field(0, ge=0)


def _ints(text: str, field: str) -> tuple[int, ...]:
    try:
        out = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise FieldError(f"{field} expects comma-separated integers, got {text!r}", field) from None
    if not out or any(v <= 0 for v in out):
        raise FieldError(f"{field} needs positive integers, e.g. 1,2,4; got {text!r}", field)
    return out


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if "/" not in part:
            raise FieldError(
                f"precision expects weights/KV pairs like fp8/fp8, got {part!r}", "precision"
            )
        w, kv = (s.strip() for s in part.split("/", 1))
        out.append((check_dtype(w, "precision"), check_dtype(kv, "precision")))
    if not out:
        raise FieldError("precision needs at least one weights/KV pair, e.g. fp8/fp8", "precision")
    return tuple(dict.fromkeys(out))


def build_request(f: PlanForm):
    """The :class:`~infercast.plan.PlanRequest` for this form (every field checked first)."""
    from infercast.plan import PlanRequest
    from infercast.specs.catalog import hardware_names, model_names

    if f.model not in model_names():
        raise FieldError(f"unknown model {f.model!r}: pick a preset", "model")
    parts = tuple(h.strip() for h in f.hardware.split(",") if h.strip())
    unknown = [h for h in parts if h not in hardware_names()]
    if not parts or unknown:
        raise FieldError(
            f"unknown part {', '.join(unknown) or '(none)'}: give preset keys, comma-separated",
            "hardware",
        )
    fixed = f.lengths == "fixed"
    try:
        return PlanRequest(
            model=f.model,
            hardware=parts,
            rate=f.rate,
            slo_ttft_p99_s=f.slo_ttft_p99,
            slo_tpot_p99_s=f.slo_tpot_p99,
            trace=None if fixed else f.trace,
            input_tokens=f.input_tokens if fixed else None,
            output_tokens=f.output_tokens if fixed else None,
            num_requests=f.num_requests,
            seed=f.seed,
            tps=_ints(f.tp, "tp"),
            precisions=_pairs(f.precision),
            speculative=(False, True) if f.speculative else (False,),
            disagg_ratios=((1, 1), (1, 2), (2, 1)) if f.disaggregation else (),
        )
    except InfercastError as exc:
        raise FieldError(str(exc)) from None


def command_line(f: PlanForm) -> str:
    """The ``infercast plan`` command for this form."""
    a = [
        "infercast",
        "plan",
        "--model",
        f.model,
        "--hardware",
        f.hardware,
        "--rate",
        f"{f.rate:g}",
        "--slo-ttft-p99",
        f"{f.slo_ttft_p99:g}",
        "--slo-tpot-p99",
        f"{f.slo_tpot_p99:g}",
    ]
    if f.lengths == "trace":
        a += ["--trace", f.trace]
    else:
        a += ["--input-tokens", str(f.input_tokens), "--output-tokens", str(f.output_tokens)]
    a += [
        "--tp",
        f.tp,
        "--precision",
        f.precision,
        "--num-requests",
        str(f.num_requests),
        "--seed",
        str(f.seed),
        "--speculative" if f.speculative else "--no-speculative",
    ]
    if not f.disaggregation:
        a += ["--disagg-ratios", "none"]
    return shlex.join(a + ["--json"])


def run(f: PlanForm, req, progress: Callable[[float], None]) -> dict[str, Any]:
    """Plan on the default executor and shape the answer for the page."""
    from infercast.plan import pareto_frontier, pareto_points, plan
    from infercast.plan.executors import default_executor

    result = plan(req, default_executor())
    d = result.to_dict()
    points = pareto_points(result)
    d["pareto_frontier"] = pareto_frontier(points)
    progress(1.0)
    return {"result": d, "points": points, "command": command_line(f)}
