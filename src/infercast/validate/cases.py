"""Measurement rows: read a CSV with the documented columns into typed :class:`Case` objects.

The schema is the shipped ``data/measurements.csv`` (``docs/validation.md``):
unknown extra columns are ignored, missing optional columns read as empty, and a
row whose required fields cannot be parsed becomes a :class:`Case` carrying a
``problem`` (the per-row reason), never an exception and never a silent drop.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infercast.errors import DataError
from infercast.specs.catalog import data_path

REQUIRED_COLUMNS = ("id", "scenario", "metric", "value")
OPTIONAL_COLUMNS = (
    "source",
    "citation",
    "model",
    "hardware",
    "n_gpus",
    "tp",
    "pp",
    "ep",
    "dp",
    "weights",
    "kv_cache",
    "engine",
    "input_tokens",
    "output_tokens",
    "dataset",
    "batch",
    "concurrency",
    "request_rate",
    "unit_si",
    "quality",
    "extra",
)
INT_COLUMNS = (
    "n_gpus",
    "tp",
    "pp",
    "ep",
    "dp",
    "input_tokens",
    "output_tokens",
    "batch",
    "concurrency",
)
SCENARIOS = (
    "offline",
    "static_batch",
    "concurrency",
    "server",
    "single_stream",
    "kernel",
    "speculative",
    "disaggregated",
    "energy",
)


@dataclass(frozen=True)
class Case:
    """One measured number and the setup it was measured on (SI units; None = not stated)."""

    id: str
    scenario: str
    metric: str
    value: float
    source: str = ""
    model: str = ""
    hardware: str = ""
    engine: str = ""
    weights: str = ""
    kv_cache: str = ""
    dataset: str = ""
    quality: str = ""
    n_gpus: int | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    dp: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    batch: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why the row is malformed (then it is reported, never predicted)
    line: int = 0  # 1-based line in the CSV (header = line 1)


def _number(raw: str, name: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def _int(raw: str, name: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    x = _number(raw, name)  # "8" and "8.0" both mean 8
    # a count of GPUs, tokens or requests: 0 is not "not given" (leave the cell empty for
    # that), and nothing measured had 2**31 of them
    if not math.isfinite(x) or x != int(x) or not 1 <= x < 2**31:
        raise ValueError(
            f"{name}={raw!r} is not a positive integer (below 2**31); "
            "leave the cell empty when not stated"
        )
    return int(x)


def _float(raw: str, name: str, positive: bool = False) -> float | None:
    raw = raw.strip()
    if not raw:
        return None
    x = _number(raw, name)
    if not math.isfinite(x) or (positive and x <= 0):
        raise ValueError(f"{name}={raw!r} must be a finite number{' > 0' if positive else ''}")
    return x


def _extra(raw: str) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        extra = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"extra is not valid JSON ({exc.msg})") from None
    if not isinstance(extra, dict):
        raise ValueError("extra must be a JSON object")
    return extra


def parse_row(row: dict[str, str], line: int) -> Case:
    """A CSV row (column -> text) as a Case; a bad field sets ``problem`` naming it."""
    g = {k: (row.get(k) or "").strip() for k in REQUIRED_COLUMNS + OPTIONAL_COLUMNS}
    rid = g["id"] or f"line-{line}"
    base = dict(
        id=rid,
        scenario=g["scenario"],
        metric=g["metric"],
        value=math.nan,
        line=line,
        source=g["source"],
        model=g["model"],
        hardware=g["hardware"],
        engine=g["engine"],
        weights=g["weights"].lower(),
        kv_cache=g["kv_cache"].lower(),
        dataset=g["dataset"],
        quality=g["quality"],
    )
    try:
        for key in REQUIRED_COLUMNS:
            if not g[key]:
                raise ValueError(f"required column {key!r} is empty")
        value = _number(g["value"], "value")
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"value={g['value']!r} must be a positive finite number in SI units")
        ints = {k: _int(g[k], k) for k in INT_COLUMNS}
        rate = _float(g["request_rate"], "request_rate", positive=True)
        extra = _extra(g["extra"])
    except ValueError as exc:
        return Case(**base, problem=f"line {line}: {exc}")
    return Case(**{**base, "value": value}, **ints, request_rate=rate, extra=extra)


def read_cases(text: str, name: str = "<csv>") -> list[Case]:
    """Every data row of a CSV text as a Case (malformed rows carry ``problem``)."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None:
        raise DataError(
            f"measurements {name}: the file is empty; expected a header with "
            f"{', '.join(REQUIRED_COLUMNS)}"
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in reader.fieldnames]
    if missing:
        raise DataError(
            f"measurements {name}: missing column(s) {', '.join(missing)}; "
            f"see docs/validation.md for the schema"
        )
    cases, seen = [], set()
    for i, row in enumerate(reader, start=2):
        if None in row:  # more cells than header columns
            cases.append(
                Case(
                    id=row.get("id") or f"line-{i}",
                    scenario=row.get("scenario") or "",
                    metric=row.get("metric") or "",
                    value=math.nan,
                    line=i,
                    problem=f"line {i}: more cells than header columns",
                )
            )
            continue
        case = parse_row(row, i)
        if case.problem is None and case.id in seen:
            case = Case(
                id=case.id,
                scenario=case.scenario,
                metric=case.metric,
                value=math.nan,
                line=i,
                problem=f"line {i}: duplicate id {case.id!r}",
            )
        seen.add(case.id)
        cases.append(case)
    return cases


def load_cases(path: str | Path | None = None) -> list[Case]:
    """The shipped measurement set (``path=None``) or a user CSV with the documented columns."""
    p = Path(path) if path is not None else data_path("measurements.csv")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise DataError(f"cannot read measurements {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"measurements {p} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    return read_cases(text, str(p))
