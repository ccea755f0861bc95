"""The Compare view: several Estimate forms on the same charts, and how they differ in words.

Each configuration is one :func:`~infercast.ui.estimate_view.estimate_payload`;
the sentences only set the library's numbers side by side (values and their ratio).
"""

from __future__ import annotations

from typing import Any

from infercast.errors import InfercastError
from infercast.ui.estimate_view import CurveCache, estimate_payload
from infercast.ui.inputs import EstimateForm, FieldError

MAX_CONFIGS = 6
LETTERS = "ABCDEF"
_FIELDS = (
    "model",
    "hardware",
    "weights",
    "compute",
    "kv_cache",
    "tp",
    "pp",
    "ep",
    "prompt",
    "context",
    "batch",
    "profile",
    "engine",
    "price",
)


def _changed(a: EstimateForm, b: EstimateForm) -> str:
    parts = [
        f"{f} {getattr(a, f) or 'default'} -> {getattr(b, f) or 'default'}"
        for f in _FIELDS
        if getattr(a, f) != getattr(b, f)
    ]
    return ", ".join(parts) or "same inputs"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.2f} ms"


def _vs(name: str, a: float | None, b: float | None, show) -> str:
    if a is None or b is None:
        return f"{name} {show(b)} vs {show(a)}"
    ratio = f" ({b / a:.2f}x)" if a else ""
    return f"{name} {show(b)} vs {show(a)}{ratio}"


def differences(forms: list[EstimateForm], payloads: list[dict[str, Any]]) -> list[str]:
    """One sentence per configuration after the first: what changed, and what it did."""
    out = []
    base = payloads[0]["result"]
    for i in range(1, len(forms)):
        r = payloads[i]["result"]
        d0, d1 = base["decode"][-1], r["decode"][-1]
        money = lambda x: "-" if x is None else f"${x:,.3f}"  # noqa: E731
        bits = [
            _vs(f"TPOT at batch {d1['batch']}", d0["step_time_s"], d1["step_time_s"], _ms),
            _vs("decode tok/s", d0["tokens_per_s"], d1["tokens_per_s"], lambda x: f"{x:,.0f}"),
            _vs("TTFT", base["prefill"]["ttft_s"], r["prefill"]["ttft_s"], _ms),
            f"max batch {r['memory']['max_batch']:,} vs {base['memory']['max_batch']:,}",
            _vs(
                "$/M output tokens",
                d0["cost_per_million_output_tokens"],
                d1["cost_per_million_output_tokens"],
                money,
            ),
            f"decode bound {payloads[i]['regime']} vs {payloads[0]['regime']}",
        ]
        if d1["fits"] != d0["fits"]:
            bits.append(
                f"batch {d1['batch']} {'fits' if d1['fits'] else 'does not fit'} "
                f"({'not ' if not d0['fits'] else ''}in {LETTERS[0]})"
            )
        out.append(
            f"{LETTERS[i]} vs {LETTERS[0]} ({_changed(forms[0], forms[i])}): "
            + "; ".join(bits)
            + "."
        )
    return out


def compare_payload(body: Any, cache: CurveCache | None = None) -> dict[str, Any]:
    """``{"configs": [form, ...]}`` -> each configuration's payload and the differences."""
    configs = body.get("configs") if isinstance(body, dict) else None
    if not isinstance(configs, list) or not 2 <= len(configs) <= MAX_CONFIGS:
        raise FieldError(f"compare takes 2 to {MAX_CONFIGS} configurations")
    forms, payloads = [], []
    for i, raw in enumerate(configs):
        try:
            form = EstimateForm.parse(raw)
            payloads.append(estimate_payload(form, cache))
        except InfercastError as exc:
            field = getattr(exc, "field", None)
            raise FieldError(f"{LETTERS[i]}: {exc}", f"{i}.{field}" if field else str(i)) from None
        forms.append(form)
    return {"items": payloads, "differences": differences(forms, payloads)}
