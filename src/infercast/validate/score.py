"""Scores: per-row errors, summaries per scenario / metric / hardware / source, floor check.

Errors are signed ``(predicted - measured) / measured`` in percent; summaries use
the absolute value. ``coverage`` = predicted rows / rows; ``within_10_pct`` and
``within_25_pct`` are fractions (0..1) of the *predicted* rows.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from infercast.validate.cases import Case
from infercast.validate.evaluate import Prediction

WORST = 10


def stats(preds: Sequence[Prediction]) -> dict[str, Any]:
    """count, predicted, coverage, median/mean abs % error, median signed, within 10/25 %."""
    errs = np.array([p.error_pct for p in preds if p.predicted is not None], dtype=np.float64)
    a = np.abs(errs)
    n = len(preds)
    out: dict[str, Any] = {
        "count": n,
        "predicted": int(errs.size),
        "coverage": errs.size / n if n else None,
    }
    if errs.size:
        out.update(
            median_abs_error_pct=float(np.median(a)),
            mean_abs_error_pct=float(a.mean()),
            median_signed_error_pct=float(np.median(errs)),
            within_10_pct=float((a <= 10).mean()),
            within_25_pct=float((a <= 25).mean()),
        )
    else:
        out.update(
            median_abs_error_pct=None,
            mean_abs_error_pct=None,
            median_signed_error_pct=None,
            within_10_pct=None,
            within_25_pct=None,
        )
    return out


def by(preds: Sequence[Prediction], key: Callable[[Prediction], str]) -> dict[str, dict[str, Any]]:
    """``stats`` per value of ``key``, sorted by key."""
    groups: dict[str, list[Prediction]] = defaultdict(list)
    for p in preds:
        groups[key(p)].append(p)
    return {k: stats(v) for k, v in sorted(groups.items())}


def row_dict(p: Prediction) -> dict[str, Any]:
    """The JSON of one row (contract keys first)."""
    c = p.case
    e = p.error_pct
    return {
        "id": c.id,
        "metric": c.metric,
        "measured": c.value,
        "predicted": p.predicted,
        "error_pct": e,
        "abs_error_pct": None if e is None else abs(e),
        "skipped_reason": p.skipped_reason,
        "scenario": c.scenario,
        "source": c.source,
        "model": c.model,
        "hardware": c.hardware,
        "engine": c.engine,
        "group": p.group,
        "assumed_weights": p.assumed_weights,
        "notes": list(p.notes),
        **({"closed_form": p.closed_form} if p.closed_form is not None else {}),
    }


def case_row(c: Case) -> dict[str, str]:
    """A Case as the string mapping ``validate.floor.check_row`` reads."""
    d = asdict(c)
    return {
        k: "" if v is None else str(v)
        for k, v in d.items()
        if k not in ("extra", "problem", "line")
    }


def floor_report(cases: Sequence[Case]) -> dict[str, Any]:
    """Every row that beats its physics floor (or ceiling), and how many rows were checked."""
    from infercast.validate.floor import check_closed_loop, check_row

    checked, violations = 0, []
    sources = {c.id: c.source for c in cases}
    checks = [check_row(case_row(c)) for c in cases if not c.problem]
    checks += [check_closed_loop(case_row(t), case_row(d)) for t, d in closed_loop_pairs(cases)]
    for chk in checks:
        if chk.bound is None:
            continue
        checked += 1
        if chk.violates:
            violations.append(
                {
                    "id": chk.id,
                    "metric": chk.metric,
                    "measured": chk.measured,
                    "bound": chk.bound,
                    "kind": chk.kind,
                    "ratio": chk.ratio,
                    "source": sources.get(chk.id, ""),
                    "rows": list(chk.rows or (chk.id,)),
                }
            )
    return {"checked": checked, "violations": violations}


def closed_loop_pairs(cases: Sequence[Case]) -> list[tuple[Case, Case]]:
    """(TTFT row, TPOT row) of each fixed-concurrency run: rows alike in everything but the
    id, metric and value. Repeated runs of one setup pair in file order (a run's two rows
    are written together); a setup with unequal counts of the two metrics is left unpaired."""
    runs: dict[str, dict[str, list[Case]]] = {}
    for c in cases:
        if (
            c.problem
            or c.scenario != "concurrency"
            or c.metric not in ("ttft_mean_s", "tpot_mean_s")
        ):
            continue
        setup = {
            k: v
            for k, v in asdict(c).items()
            if k not in ("id", "metric", "value", "line", "problem")
        }
        key = json.dumps(setup, sort_keys=True, default=str)
        runs.setdefault(key, {}).setdefault(c.metric, []).append(c)
    pairs: list[tuple[Case, Case]] = []
    for r in runs.values():
        ttft, tpot = r.get("ttft_mean_s", []), r.get("tpot_mean_s", [])
        if len(ttft) == len(tpot):
            pairs += zip(
                sorted(ttft, key=lambda c: c.line), sorted(tpot, key=lambda c: c.line), strict=True
            )
    return pairs


def assumed_layout(p: Prediction) -> bool:
    """True for a row predicted on an assumed layout: disaggregated rows whose source dropped
    the worker counts (``validate/disagg.py``, ``UNSTATED_WORKERS_NOTE``), and rows whose stated
    TP cannot shard the model's heads, predicted as attention DP (``validate/setup.py``,
    ``ASSUMED_DP_NOTE``), and runs that drafted with MTP, predicted without it
    (``UNSIMULATED_MTP_NOTE``)."""
    from infercast.closedform.disagg import UNSTATED_WORKERS_NOTE
    from infercast.validate.setup import ASSUMED_DP_NOTE, UNSIMULATED_MTP_NOTE

    return UNSTATED_WORKERS_NOTE in p.notes or any(
        ASSUMED_DP_NOTE in n or UNSIMULATED_MTP_NOTE in n for n in p.notes
    )


def agreement(preds: Sequence[Prediction]) -> dict[str, dict[str, Any]]:
    """Per scenario/metric, how the simulator's value compares with the closed form's on the rows
    predicted by both: rows, the median and 10th-90th percentiles of simulator / closed form, the
    median |ratio - 1| %, and each one's median |error| % against the measurement."""
    groups: dict[str, list[Prediction]] = {}
    for p in preds:
        if p.predicted is not None and p.closed_form:
            groups.setdefault(f"{p.case.scenario}/{p.case.metric}", []).append(p)
    out = {}
    for k, ps in sorted(groups.items()):
        ratios = [p.predicted / p.closed_form for p in ps]
        deciles = (
            statistics.quantiles(ratios, n=10, method="inclusive")
            if len(ratios) > 1
            else ratios * 9
        )
        out[k] = {
            "rows": len(ps),
            "median_ratio": statistics.median(ratios),
            "p10_ratio": deciles[0],
            "p90_ratio": deciles[-1],
            "median_abs_diff_pct": statistics.median(abs(r - 1) * 100 for r in ratios),
            "median_abs_error_pct_sim": statistics.median(abs(p.error_pct) for p in ps),
            "median_abs_error_pct_closed": statistics.median(
                abs(p.closed_form - p.case.value) / p.case.value * 100 for p in ps
            ),
        }
    return out


def report(
    preds: Sequence[Prediction], profile_name: str, floor: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``--json`` object: rows, summary (per scenario, metric, hardware, source, group),
    worst rows."""
    predicted = [p for p in preds if p.predicted is not None]
    worst = sorted(predicted, key=lambda p: -abs(p.error_pct))[:WORST]
    skipped = Counter(p.skipped_reason for p in preds if p.skipped_reason)
    summary = {
        "overall": stats(preds),
        "scenario": by(preds, lambda p: p.case.scenario),
        "metric": by(preds, lambda p: p.case.metric),
        "scenario_metric": by(preds, lambda p: f"{p.case.scenario}/{p.case.metric}"),
        "hardware": by(preds, lambda p: p.case.hardware or "(none)"),
        "source": by(preds, lambda p: p.case.source or "(none)"),
        "group": by(predicted, lambda p: p.group),
        "worst": [row_dict(p) for p in worst],
        "skipped_reasons": dict(skipped.most_common()),
        "assumed_weights": stats(
            [p for p in preds if p.assumed_weights]
        ),  # rows whose weight dtype was assumed
        "assumed_layout": stats(
            [p for p in preds if assumed_layout(p)]
        ),  # disaggregated rows without worker counts
        "nothing_assumed": stats(
            [p for p in preds if not p.assumed_weights and not assumed_layout(p)]
        ),
    }
    cross = agreement(preds)
    if cross:
        summary["simulation_vs_closed_form"] = cross
    out = {"profile": profile_name, "rows": [row_dict(p) for p in preds], "summary": summary}
    if floor is not None:
        out["floor"] = floor
        _mark_floor_violations(out["rows"] + summary["worst"], floor["violations"])
    return out


def _mark_floor_violations(rows: list[dict[str, Any]], violations: list[dict[str, Any]]) -> None:
    """A note on every row a floor violation covers: its error then measures the data, not the
    model."""
    notes: dict[str, list[str]] = {}
    for v in violations:
        side = "below the floor" if v["kind"] == "floor" else "above the ceiling"
        for rid in v.get("rows", [v["id"]]):
            notes.setdefault(rid, []).append(
                f"measurement beats physics: {v['metric']} is {v['ratio']:.2f}x "
                f"its bound ({side}; docs/validation.md)"
            )
    for r in rows:
        r["notes"] = r["notes"] + notes.get(r["id"], [])
