"""Benchmark data sets (``data/datasets.csv``): mean lengths and request counts of a row's
workload."""

from __future__ import annotations

import csv
import re
from functools import lru_cache

from infercast.specs.catalog import data_path


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, str]]:
    with data_path("datasets.csv").open(newline="") as fh:
        return {row["dataset"]: row for row in csv.DictReader(fh)}


def _num(text: str | None) -> int | None:
    return int(round(float(text))) if text and text.strip() else None


def dataset_lengths(name: str) -> tuple[int | None, int | None]:
    """(mean input tokens, mean output tokens) of a shipped data set; None where not known."""
    row = _table().get(name.strip())
    if row is None:
        return None, None
    return _num(row.get("mean_input_tokens")), _num(row.get("mean_output_tokens"))


def dataset_requests(name: str) -> int | None:
    """The request count a dataset label states (``...;n_requests=500;...``), else None."""
    m = re.search(r"n_requests=(\d+)", name)
    return int(m.group(1)) if m else None
