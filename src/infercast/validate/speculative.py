"""Speculative-decoding rows: the speedup of a drafter + verifier at a measured acceptance length.

The acceptance length tau (tokens emitted per verify step, bonus token included)
is a property of the drafter and the data, not of the hardware: it is an *input*
here, taken from the row's ``extra.acceptance_length`` or from the paired
``acceptance_length`` row of the same source, model, part, engine and dataset.
Given tau, :class:`infercast.cost.speculative.SpeculativeModel` times one draft +
verify step against a plain decode step: speedup = plain * tau / (draft + verify).

Drafting shapes (the engine text says "chain N" when the source used a chain):
a chain of N drafts verifies N + 1 tokens; EAGLE's research implementation
drafts a tree (EAGLE-1: depth 5, 26 tokens verified; EAGLE-2/3: dynamic trees
of 60 tokens, depth 6 and 8). A row without a stated precision is timed at 16
bits: at batch 1 both steps stream the same weights, so the ratio barely moves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from infercast.validate.cases import Case

# method -> (drafted depth k, verified tokens per sequence)
TREES = {"eagle-3": (8, 60), "eagle-2": (6, 60), "eagle": (5, 26)}


def drafting(engine: str) -> tuple[int, int] | None:
    """(k, verify width) from the engine text; None for methods with no drafter model here."""
    e = engine.lower()
    chain = re.search(r"chain (\d+)", e)
    if "eagle" not in e:
        return None
    if chain:
        k = int(chain.group(1))
        return k, k + 1
    for name, shape in TREES.items():
        if name in e:
            return shape
    return None


def _pair_key(c: Case) -> tuple:
    return (c.source, c.model, c.hardware, c.engine, c.dataset, c.batch)


def with_acceptance(cases: Sequence[Case]) -> list[Case]:
    """Copy each speculative row's paired acceptance length into ``extra`` (when it has none)."""
    tau = {
        _pair_key(c): c.value
        for c in cases
        if c.scenario == "speculative" and c.metric == "acceptance_length" and not c.problem
    }
    out = []
    for c in cases:
        if (
            c.scenario == "speculative"
            and c.metric != "acceptance_length"
            and "acceptance_length" not in c.extra
        ):
            t = tau.get(_pair_key(c))
            if t is not None:
                c = replace(c, extra={**c.extra, "acceptance_length": t})
        out.append(c)
    return out
