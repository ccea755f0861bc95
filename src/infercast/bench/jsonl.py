"""``bench --jsonl``: every measured request as one JSON line (tables and plots: ``report/``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from infercast.bench.run import BenchResult


def write_jsonl(results: Sequence[BenchResult], path: str) -> None:
    """Every measured request as one JSON line (the RequestRecord fields, plus the run's load)."""
    with Path(path).open("w") as fh:
        for r in results:
            for rec in r.records:
                row = dataclasses.asdict(rec)
                row["load"] = {
                    "request_rate": r.config.request_rate,
                    "concurrency": r.config.concurrency,
                }
                fh.write(json.dumps(row) + "\n")
