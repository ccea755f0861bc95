"""Claim 1: the seed's minimal-implementation table, and "double it for a realistic TPOT".

Runs the seed case through ``infercast estimate`` (the seed's own formula is the
``seed_formula_time_s`` column; the physics floor is ``floor_step_time_s``), redoes
the seed's arithmetic with its round 70e9 parameters, and compares infercast's
floor with every measured TPOT of Llama-3.x-70B FP8 on H100 in the shipped
measurements (achieved fraction of the bandwidth floor = floor / measured).
The preset is Llama-3.1-70B: the same shapes as the seed's Llama-3-70B (80
layers, 8 KV heads of 128, 70.55B parameters).
"""

from __future__ import annotations

import csv
import statistics
from importlib.resources import files

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, decode_row, infercast, main

SEED_MS = {1: 21.00, 8: 21.70, 32: 24.10, 64: 27.31}
SEED_TOK_S = {1: 48, 8: 369, 32: 1328, 64: 2344}
COMMAND = (
    "infercast estimate --profile builtin --model llama-3.1-70b --hardware h100-sxm --weights fp8 "
    "--kv-cache fp8 --batch 1,8,32,64 --context 2048 --json"
)
CLAIM = {
    "id": 1,
    "claim": "Llama-3-70B FP8 on one H100, context 2048, batch 1/8/32/64: 21.00/21.70/24.10/27.31 "
    "ms, 48/369/1,328/2,344 tok/s; double these for a realistic TPOT (~47% of bandwidth achieved)",
    "where": "seed, the minimal implementation's output table and the note under it",
    "commands": [
        COMMAND,
        "infercast estimate --profile builtin --model llama-3.1-70b --hardware h100-sxm --weights "
        "fp8 --tp T --batch C --context I+O/2 --json   (per measured TPOT row: its TP, "
        "concurrency, lengths)",
    ],
}


def _measured_tpot_rows() -> list[dict[str, str]]:
    """Measured mean TPOT of Llama-3.x-70B with FP8 weights on H100 SXM (data/measurements.csv)."""
    path = files("infercast") / "data" / "measurements.csv"
    with path.open(newline="") as f:
        return [
            r
            for r in csv.DictReader(f)
            if r["model"] in ("llama-3-70b", "llama-3.1-70b", "llama-3.3-70b")
            and r["hardware"] == "h100-sxm"
            and r["weights"] == "fp8"
            and r["metric"] == "tpot_mean_s"
        ]


def _achieved_fraction(row: dict[str, str]) -> dict[str, float]:
    """Floor / measured TPOT at the row's TP and concurrency, mean decode context = input +
    output / 2."""
    tp, conc = int(row["tp"]), int(row["concurrency"] or row["batch"])
    context = int(row["input_tokens"]) + int(row["output_tokens"]) // 2
    kv = f" --kv-cache {row['kv_cache']}" if row["kv_cache"] else ""
    est = infercast(
        "infercast estimate --profile builtin --model llama-3.1-70b --hardware h100-sxm --weights "
        f"fp8{kv} --tp {tp} --batch {conc} --context {context} --json"
    )
    d = decode_row(est, conc)
    measured = float(row["value"])
    return {
        "id": row["id"],
        "tp": tp,
        "concurrency": conc,
        "context": context,
        "measured_tpot_s": measured,
        "floor_s": d["floor_step_time_s"],
        "expected_s": d["step_time_s"],
        "achieved_fraction": d["floor_step_time_s"] / measured,
    }


def run() -> dict:
    est = infercast(COMMAND)
    bw = est["hardware"]["memory_bandwidth_bytes_per_s"]
    kv_per_token = est["model"]["kv_bytes_per_token"]
    rows = []
    for b in (1, 8, 32, 64):
        d = decode_row(est, b, 2048)
        seed_round_s = (
            70e9 * 1 + kv_per_token * 2048 * b
        ) / bw  # the seed's formula with its round 70e9
        rows.append(
            {
                "batch": b,
                "seed_ms": SEED_MS[b],
                "seed_round_params_ms": seed_round_s * 1e3,
                "seed_round_tok_s": b / seed_round_s,
                "seed_formula_ms": d["seed_formula_time_s"] * 1e3,
                "floor_ms": d["floor_step_time_s"] * 1e3,
                "expected_ms": d["step_time_s"] * 1e3,
                "expected_over_seed": d["step_time_s"] / d["seed_formula_time_s"],
                "fits": d["fits"],
            }
        )
    measured = [_achieved_fraction(r) for r in _measured_tpot_rows()]
    fractions = [m["achieved_fraction"] for m in measured]
    by_tp = {
        str(tp): statistics.median(m["achieved_fraction"] for m in measured if m["tp"] == tp)
        for tp in sorted({m["tp"] for m in measured})
    }
    return {
        "kv_bytes_per_token": kv_per_token,
        "achieved_fraction_median_by_tp": by_tp,
        "total_params": est["model"]["total_params"],
        "max_batch": est["memory"]["max_batch"],
        "rows": rows,
        "measured": measured,
        "achieved_fraction_median": statistics.median(fractions),
        "achieved_fraction_min": min(fractions),
        "achieved_fraction_max": max(fractions),
    }


def verdict(r: dict) -> tuple[str, str]:
    rows = r["rows"]
    table_ok = all(abs(x["seed_round_params_ms"] - x["seed_ms"]) < 0.01 for x in rows)
    fit_note = ", ".join(f"b{x['batch']} {'fits' if x['fits'] else 'does NOT fit'}" for x in rows)
    ms = " / ".join(f"{x['seed_round_params_ms']:.2f}" for x in rows)
    tok = " / ".join(f"{x['seed_round_tok_s']:,.0f}" for x in rows)
    floor = " / ".join(f"{x['floor_ms']:.2f}" for x in rows)
    exp = " / ".join(f"{x['expected_ms']:.1f}" for x in rows)
    ratio = " / ".join(f"{x['expected_over_seed']:.2f}" for x in rows)
    med = r["achieved_fraction_median"]
    tp_lo, tp_hi = min(m["tp"] for m in r["measured"]), max(m["tp"] for m in r["measured"])
    c_lo, c_hi = (
        min(m["concurrency"] for m in r["measured"]),
        max(m["concurrency"] for m in r["measured"]),
    )
    tps = ", ".join(f"TP{k} {v:.0%}" for k, v in r["achieved_fraction_median_by_tp"].items())
    finding = (
        f"seed formula with 70e9 params: {ms} ms, {tok} tok/s; infercast floor (70.55B params, "
        f"gathered embedding rows only): {floor} ms; expected {exp} ms = {ratio}x the seed "
        f"formula, not 2x. {len(r['measured'])} measured vLLM TPOTs (Llama-3.1-70B FP8, H100, TP "
        f"{tp_lo}-{tp_hi}, concurrency {c_lo}-{c_hi}) reach "
        f"{r['achieved_fraction_min']:.0%}-{r['achieved_fraction_max']:.0%} of the bandwidth floor "
        f"(median {med:.0%}; by TP: {tps}; the seed says ~47%). Memory: {fit_note} (max batch "
        f"{r['max_batch']})."
    )
    if not table_ok:
        return REFUTED, finding
    if 0.35 <= med <= 0.6:
        return REPRODUCED, finding + (
            " The table is exact; the ~2x rule holds as the median of measured engines"
            " (it is TP-dependent), while infercast's fitted expected time is ~1.3x."
        )
    return CONDITIONAL, (
        finding + " The table is exact; 'double it' is the measured engines' gap, while "
        "infercast's fitted expected time is only ~1.25x the floor at TP1."
    )


if __name__ == "__main__":
    main(__import__(__name__))
