"""Plumbing shared by the claim examples (not an example itself).

Each example ``cNN_*.py`` defines ``CLAIM`` (metadata for docs/claims.md),
``run() -> dict`` (the numbers, computed by the infercast commands it lists)
and ``verdict(result) -> (verdict, finding)``, and prints both when run as a
script. ``infercast(command)`` runs an ``infercast ... --json`` command line in
this process (the same code path as the shell) and returns its JSON, so the
command shown in the claims table is exactly the one that produced the numbers.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from typing import Any

REPRODUCED = "reproduced"
CONDITIONAL = "holds only under stated conditions"
REFUTED = "refuted"
VERDICTS = (REPRODUCED, CONDITIONAL, REFUTED)


def infercast(command: str) -> dict[str, Any]:
    """Run ``infercast ARGS --json`` in-process and return the parsed JSON object."""
    from infercast.cli import main

    argv = shlex.split(command)
    if argv[:1] != ["infercast"] or "--json" not in argv:
        raise ValueError(f"expected an 'infercast ... --json' command line, got {command!r}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(argv[1:])
    return json.loads(out.getvalue())


def decode_row(est: dict[str, Any], batch: int, context: int | None = None) -> dict[str, Any]:
    """The decode row of an ``estimate --json`` output at this batch (and context)."""
    for row in est["decode"]:
        if row["batch"] == batch and (context is None or row["context"] == context):
            return row
    raise KeyError(f"no decode row at batch {batch}, context {context}")


def serving_row(sim: dict[str, Any]) -> dict[str, Any]:
    """Output tokens/s, p50 TPOT and TTFT and KV blocks of a ``simulate --json`` output."""
    return {
        "output_tokens_per_s": sim["output_throughput_tokens_per_s"],
        "tpot_p50_s": sim["tpot_s"]["p50"],
        "ttft_p50_s": sim["ttft_s"]["p50"],
        "kv_blocks": sim["num_kv_blocks"],
    }


def variants(command: str, setups: dict[str, str]) -> dict[str, dict[str, Any]]:
    """``command`` run once per setup's extra flags: {setup name: its JSON}."""
    return {name: infercast(f"{command} {flags}".strip()) for name, flags in setups.items()}


def cheapest_option(plan: dict[str, Any], disaggregated: bool) -> dict[str, Any] | None:
    """The cheapest option of a ``plan --json`` output that meets the SLO, aggregated or
    disaggregated (label, GPUs, $/h, p99 TTFT and TPOT), or None."""
    options = ([plan["best"]] if plan["best"] else []) + plan["alternatives"]
    fits = [o for o in options if o["meets_slo"] and o["disaggregated"] == disaggregated]
    if not fits:
        return None
    o = min(fits, key=lambda x: x["cost_per_hour"])
    return {
        "label": o["label"],
        "num_gpus": o["num_gpus"],
        "cost_per_hour": o["cost_per_hour"],
        "ttft_p99_s": o["ttft_p99_s"],
        "tpot_p99_s": o["tpot_p99_s"],
    }


def main(module: Any) -> None:
    """Print an example's numbers and its verdict (what ``python examples/cNN_*.py`` shows)."""
    result = module.run()
    verdict, finding = module.verdict(result)
    print(
        json.dumps(
            {
                "claim": module.CLAIM["claim"],
                "verdict": verdict,
                "finding": finding,
                "result": result,
            },
            indent=2,
        )
    )
