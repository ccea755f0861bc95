"""Request-trace formats beyond plain CSV: ShareGPT JSON, Mooncake JSONL, JSON row lists.

Each reader turns a file's text into row dicts with the columns
:func:`infercast.sim.workload.load_trace` understands (``arrival_s``,
``prompt_tokens``, ``output_tokens``), so every format ends in the same checks.

- **ShareGPT** (a JSON list of ``{"conversations": [{"from", "value"}, ...]}``):
  the first turn is the prompt, the second the reply. It has no times, so every
  row arrives at 0 s (give a request rate to space them) and no token counts, so
  lengths are estimated from the text (:func:`approx_tokens`).
- **Mooncake** (JSONL rows ``{"timestamp", "input_length", "output_length",
  "hash_ids"}``; Qin et al., *Mooncake*, FAST 2025; kvcache-ai/Mooncake traces):
  ``timestamp`` is in milliseconds. ``hash_ids`` (one id per 512-token prompt
  block, shared ids = shared prefix) are not used: the simulator's prefix cache
  takes ``prefix_groups``/``prefix_tokens`` instead.
- **Azure** CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``; Azure LLM
  inference traces 2023 and 2024) is read by the CSV path of ``load_trace``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from infercast.errors import DataError

MOONCAKE_COLUMNS = ("timestamp", "input_length", "output_length")
# OpenAI, "What are tokens and how to count them": one token is about 4 characters of English text.
CHARS_PER_TOKEN = 4.0


def approx_tokens(text: str) -> int:
    """Tokens in ``text`` without a tokenizer: characters / 4, at least 1."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def sharegpt_pairs(data: Any) -> list[tuple[str, str]]:
    """(prompt, reply) of each ShareGPT conversation that has both."""
    pairs = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        conv = item.get("conversations") or item.get("conversation") or []
        if (
            isinstance(conv, list)
            and len(conv) >= 2
            and all(isinstance(t, dict) for t in conv[:2])
            and conv[0].get("value")
            and conv[1].get("value")
        ):
            pairs.append((str(conv[0]["value"]), str(conv[1]["value"])))
    return pairs


def is_sharegpt(data: Any) -> bool:
    """A JSON list whose first object holds ``conversations``."""
    first = data[0] if isinstance(data, list) and data else None
    return isinstance(first, dict) and ("conversations" in first or "conversation" in first)


def _mooncake(row: dict) -> dict:
    return {
        "arrival_s": float(row["timestamp"]) / 1e3,
        "prompt_tokens": row["input_length"],
        "output_tokens": row["output_length"],
    }


def json_trace_rows(name: str, text: str) -> list[dict]:
    """Rows of a JSON or JSONL trace file in ``load_trace``'s column names (or its own)."""
    stripped = text.lstrip()
    if stripped.startswith("["):  # one JSON document: ShareGPT or a list of row objects
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"trace {name}: not valid JSON ({exc.msg} at line {exc.lineno})"
            ) from None
        if is_sharegpt(data):
            pairs = sharegpt_pairs(data)
            if not pairs:
                raise DataError(f"trace {name}: no ShareGPT conversation has a prompt and a reply")
            return [
                {
                    "arrival_s": 0.0,
                    "prompt_tokens": approx_tokens(p),
                    "output_tokens": approx_tokens(r),
                }
                for p, r in pairs
            ]
        rows = data
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(f"trace {name}: line {i} is not JSON ({exc.msg})") from None
    bad = next((i for i, r in enumerate(rows, 1) if not isinstance(r, dict)), None)
    if bad is not None:
        raise DataError(f"trace {name}: row {bad} is not a JSON object with named columns")
    if rows and set(MOONCAKE_COLUMNS) <= set(rows[0]):
        try:
            return [_mooncake(r) for r in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"trace {name}: a Mooncake row lacks or mangles {exc}") from None
    return rows
