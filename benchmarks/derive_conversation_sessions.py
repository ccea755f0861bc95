"""Derive chat sessions from Mooncake's FAST'25 conversation trace (data preparation, run once).

    python benchmarks/derive_conversation_sessions.py conversation_trace.jsonl \
        src/infercast/data/conversations/mooncake-fast25-conversation.csv

The trace (kvcache-ai/Mooncake, ``FAST25-release/traces/conversation_trace.jsonl``,
Apache-2.0) lists requests with ``timestamp`` (ms), ``input_length``,
``output_length`` and ``hash_ids`` (one id per 512-token prompt block; equal ids
are equal prefixes). It has no session ids, so turns are chained here: a request
continues the *latest* earlier request whose full prompt blocks (all but a
partial last one) are a leading run of its own ids, at least two blocks long (one
shared block is typically a common system prompt, not a conversation). Its new
message is its input minus the parent's input and output, clipped to >= 1 token
(10.7 % of follow-ups are shorter than that: the service does not always keep
the previous answer verbatim in the history).
"""

from __future__ import annotations

import csv
import json
import sys

BLOCK = 512  # Mooncake's hash block size (FAST25-release/README.md)


def derive(rows: list[dict]) -> list[tuple[int, int, float, int, int, int]]:
    """(session, turn, arrival_s, input_tokens, new_input_tokens, output_tokens) per request."""
    index: dict[tuple[int, ...], int] = {}
    parent = [-1] * len(rows)
    for i, r in enumerate(rows):
        ids, full = r["hash_ids"], r["input_length"] // BLOCK
        for k in range(min(len(ids), full), 1, -1):
            j = index.get(tuple(ids[:k]))
            if j is not None:
                parent[i] = j
                break
        index[tuple(ids[:full])] = i
    session, turn = [0] * len(rows), [0] * len(rows)
    next_id = 0
    for i, p in enumerate(parent):
        if p < 0:
            session[i], turn[i] = next_id, 1
            next_id += 1
        else:
            session[i], turn[i] = session[p], turn[p] + 1
    out = []
    for i, r in enumerate(rows):
        p = parent[i]
        new = (
            r["input_length"]
            if p < 0
            else rows[i]["input_length"] - rows[p]["input_length"] - rows[p]["output_length"]
        )
        out.append(
            (
                session[i],
                turn[i],
                r["timestamp"] / 1e3,
                r["input_length"],
                max(new, 1),
                r["output_length"],
            )
        )
    # A request can branch from a turn that already has a follow-up (a regenerated answer):
    # keep one chain per session, the first follow-up at each turn.
    seen: set[tuple[int, int]] = set()
    kept = []
    for row in sorted(out, key=lambda x: (x[0], x[2])):
        if (row[0], row[1]) in seen or (row[1] > 1 and (row[0], row[1] - 1) not in seen):
            continue
        seen.add((row[0], row[1]))
        kept.append(row)
    return kept


def main(src: str, dst: str) -> None:
    with open(src) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    kept = derive(rows)
    with open(dst, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(
            ("session", "turn", "arrival_s", "input_tokens", "new_input_tokens", "output_tokens")
        )
        for s, t, a, inp, new, out in kept:
            w.writerow((s, t, f"{a:.3f}", inp, new, out))
    print(f"{len(rows)} requests -> {len(kept)} turns in {len({k[0] for k in kept})} sessions")


if __name__ == "__main__":
    main(*sys.argv[1:3])
