"""Annotate aiconfigurator's own SGLang 0.5.6.post2 runs with the server flags they ran with.

    python benchmarks/annotate_aic_sglang.py           # list what it would annotate
    python benchmarks/annotate_aic_sglang.py --write   # annotate it in measurements.csv

The silicon sample's SGLang 0.5.6.post2 runs (``sglang-0.5.6.post2`` rows; the sample's
``source_file`` is aiconfigurator's ``aic-auto-gap-analysis/data/h200_sxm/sglang/0.5.6.post2``)
were deployed from aiconfigurator's generator under Dynamo: 0.5.6.post2 is the SGLang of Dynamo
0.8.x (``ai-dynamo/aiconfigurator`` ``src/aiconfigurator/generator/config/
backend_version_matrix.yaml``), whose dated runs of the same tree say
``image=nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.8.0; measured=2026-01-23``
(``tools/accuracy_tracking/silicon_refs.csv``). From 2026-01-19 the generator's SGLang rule sets
``agg enable_mixed_chunk = true`` and ``agg_prefill_decode max_prefill_tokens = SlaConfig.isl +
1500`` (``src/aiconfigurator/generator/rule_plugin/sglang.rule``, commits fa895ffb1 and
07a377923; the same in ``rule_plugin/benchmark/sglang.rule``), and its SGLang 0.5.6.post2
template (``backend_templates/sglang/cli_args.0.5.6.post2.j2``, added 2026-01-23 in c46a56b02)
passes them as ``--enable-mixed-chunk`` and ``--max-prefill-tokens``. Each such aggregated
concurrency row gets ``"sglang_mixed_chunk": true`` and ``"max_prefill_tokens"``: its input
length + 1500 (``validate/setup.py`` ``sglang_server_args``). The generator's
``--max-running-requests`` is the sample's ``batch_size``, equal to the concurrency on every
such row, so it limits nothing and is not annotated.

Not applied to the shipped measurements.csv (issue 15, docs/history/validation.md): the 6
Llama-3.1-8B rows the lockstep put at 2.8-5.6x of their TTFT come to 0.52-0.81x, but the rows
it matched by accident fall (Llama-3.1-8B at 1000-token prompts and 160-512 clients to
0.17-0.43x, Qwen3-235B at 3-9 clients to 0.14-0.82x), so the stated concurrency TTFT median goes
from 26.2 to 26.6 % (26.6 to 26.8 % before batch waiting and the B200 FP8 KV cache). Run it with
``--write`` to reproduce that.

Only the ``extra`` cell of a row changes; the file is otherwise left byte for byte as it is.
Running it again changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotate_inferencex import (  # noqa: E402  (a sibling script)
    read_measurements,
    rewrite_extras,
    save_measurements,
)

SOURCE = "aiconfigurator-silicon-sample"
ENGINE = "sglang-0.5.6.post2"
EXTRA_PREFILL_TOKENS = 1500  # generator rule: max_prefill_tokens = isl + 1500


def server_args(row: dict) -> dict:
    """The keys one row gets (module docstring), or {}."""
    if row["source"] != SOURCE or row["engine"] != ENGINE or row["scenario"] != "concurrency":
        return {}
    return {
        "sglang_mixed_chunk": True,
        "max_prefill_tokens": int(row["input_tokens"]) + EXTRA_PREFILL_TOKENS,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="annotate the rows in the file")
    args = ap.parse_args()
    text, changed = rewrite_extras(read_measurements(), lambda row, extra: server_args(row))
    print(f"{changed} rows to change")
    save_measurements(text, changed, args.write)


if __name__ == "__main__":
    main()
