"""Options that several commands share, each defined once as an ``Annotated`` alias.

A command module imports ``from infercast.commands import _options as opts`` and writes
``profile: opts.Profile = None``: the flag, its help and its type come from here, the
default from the signature (typer reads a default only there when the option is
``Annotated``). An option whose help or default differs between commands is a different
option and stays in its command. Only typer is imported, so ``infercast --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

PROFILE_HELP = (
    "efficiency profile: 'shipped' (default: the calibrated set that infercast validate scores), "
    "'builtin' (the code's values) or a TOML from infercast calibrate"
)
ENGINE_HELP = (
    "serving-engine preset (infercast engines): vllm-0.12, sglang-0.5, trtllm-1.0 ..., a family "
    "(vllm, sglang, trtllm, trtllm-engine) or a preset .toml; sets the scheduler, memory rule and "
    "profile group (explicit flags still win)"
)

# What to predict with: estimate, simulate, plan, validate, fleet.
Profile = Annotated[str | None, typer.Option("--profile", help=PROFILE_HELP)]
Engine = Annotated[str | None, typer.Option("--engine", help=ENGINE_HELP)]
KvCache = Annotated[str | None, typer.Option("--kv-cache", help="KV-cache dtype (default: 16-bit)")]

# Output: a result as one JSON object; a catalog listing (hardware, models, engines) as JSON.
Json = Annotated[bool, typer.Option("--json", help="print one JSON object")]
JsonList = Annotated[bool, typer.Option("--json", help="print JSON")]

# The measurements validate scores and calibrate fits.
Data = Annotated[
    str | None,
    typer.Option("--data", help="measurement CSV (docs/validation.md); default: the shipped set"),
]

# Where plan's candidates and fleet's groups run.
Workers = Annotated[
    int | None, typer.Option("--workers", help="local pool size (default: CPU count)")
]

# Disaggregated serving (simulate, fleet).
PrefillTp = Annotated[
    int | None, typer.Option("--prefill-tp", help="disaggregated: prefill TP (default: --tp)")
]
DecodeTp = Annotated[
    int | None, typer.Option("--decode-tp", help="disaggregated: decode TP (default: --tp)")
]
TransferBandwidth = Annotated[
    float | None,
    typer.Option("--transfer-bandwidth", help="KV transfer bytes/s (default: 50e9 x min TP)"),
]
TransferLatency = Annotated[
    float | None,
    typer.Option("--transfer-latency-s", help="KV transfer latency (default: 0.001)"),
]

# Old names, hidden, accepted for one release (``_common.renamed`` folds them into the new).
OldConcurrency = Annotated[str | None, typer.Option("--concurrency", hidden=True)]
OldNumRequests = Annotated[int | None, typer.Option("--num-requests", hidden=True)]
OldSloTtftS = Annotated[float | None, typer.Option("--slo-ttft-s", hidden=True)]
OldSloTpotS = Annotated[float | None, typer.Option("--slo-tpot-s", hidden=True)]
