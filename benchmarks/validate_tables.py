"""The score tables of README.md and docs/accuracy.md, from ``infercast validate --fast --json``.

    infercast validate --fast --json > v.json
    python benchmarks/validate_tables.py readme < v.json   # README "Validation" table
    python benchmarks/validate_tables.py docs < v.json     # docs/accuracy.md "Current scores"

A row counts as "layout assumed" when its notes say so (disaggregated rows without
worker counts, rows whose TP cannot shard the model's heads); "nothing assumed" is
every row with a stated weight dtype and no assumed layout.
"""

from __future__ import annotations

import json
import statistics
import sys

ASSUMED_LAYOUT = ("worker counts not stated", "attention data parallel assumed")


def assumed_layout(r: dict) -> bool:
    return any(marker in n for n in r["notes"] for marker in ASSUMED_LAYOUT)


def scenario_metric(sc: str, m: str):
    return lambda r: r["scenario"] == sc and r["metric"] == m


def cell(rows, sel) -> tuple[int, float, float | None, float | None]:
    """(rows, coverage %, median |error| %, within 25 %) of the rows ``sel`` picks."""
    rs = [r for r in rows if sel(r)]
    errs = [abs(r["error_pct"]) for r in rs if r["error_pct"] is not None]
    if not rs:
        return 0, 0.0, None, None
    med = statistics.median(errs) if errs else None
    w25 = sum(e <= 25 for e in errs) / len(errs) * 100 if errs else None
    return len(rs), len(errs) / len(rs) * 100, med, w25


def docs_table(rows) -> list[str]:
    out = [
        "| scenario / metric | rows | coverage | median abs err | within 25 % |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]

    def line(label, sel):
        n, cov, med, w25 = cell(rows, sel)
        if n:
            out.append(
                f"| {label} | {n:,} | {cov:.1f} % | {'-' if med is None else f'{med:.1f} %'} | "
                f"{'-' if w25 is None else f'{w25:.0f} %'} |"
            )

    for key in (
        "offline/output_throughput_total",
        "offline/output_throughput_per_gpu",
        "static_batch/output_throughput_per_gpu",
        "server/output_throughput_total",
        "concurrency/tpot_mean_s",
        "concurrency/ttft_mean_s",
        "disaggregated/tpot_mean_s",
        "disaggregated/ttft_mean_s",
        "server/ttft_mean_s",
        "server/itl_mean_s",
        "single_stream/ttft_mean_s",
        "single_stream/tokens_per_s_single_stream",
        "kernel/decode_step_s",
        "kernel/prefill_time_s",
        "kernel/matmul_flops_per_s",
        "speculative/speedup",
    ):
        sc, m = key.split("/")
        line(f"{sc} / {m}", scenario_metric(sc, m))
    line("every throughput row", lambda r: "throughput" in r["metric"])
    line("every TPOT row", lambda r: r["metric"] == "tpot_mean_s")
    line("every TTFT row", lambda r: r["metric"] == "ttft_mean_s")
    for m, label in (("tpot_mean_s", "TPOT"), ("ttft_mean_s", "TTFT")):
        line(
            f"disaggregated {label}, workers stated",
            lambda r, m=m: scenario_metric("disaggregated", m)(r) and not assumed_layout(r),
        )
    line("all rows", lambda r: True)
    line("all rows but disaggregated", lambda r: r["scenario"] != "disaggregated")
    line(
        "nothing assumed (stated weights and layout)",
        lambda r: not r["assumed_weights"] and not assumed_layout(r),
    )
    return out


def readme_table(rows) -> list[str]:
    out = [
        "| scenario / metric | rows | coverage | median abs err |",
        "| --- | ---: | ---: | ---: |",
    ]

    def fmt(sel):
        n, cov, med, _ = cell(rows, sel)
        return n, f"{cov:.0f} %", "-" if med is None else f"{med:.1f}"

    def one(label, sel):
        n, cov, med = fmt(sel)
        out.append(f"| {label} | {n:,} | {cov} | {med} % |")

    def two(label, a, b):
        (n1, c1, e1), (n2, c2, e2) = fmt(a), fmt(b)
        cov = c1 if c1 == c2 else f"{c1[:-2]} / {c2}"
        out.append(f"| {label} | {n1:,} / {n2:,} | {cov} | {e1} / {e2} % |")

    sm = scenario_metric
    one("offline throughput (total)", sm("offline", "output_throughput_total"))
    one("offline throughput (per GPU)", sm("offline", "output_throughput_per_gpu"))
    one("static-batch throughput (per GPU)", sm("static_batch", "output_throughput_per_gpu"))
    one("server throughput", sm("server", "output_throughput_total"))
    one("concurrency TPOT", sm("concurrency", "tpot_mean_s"))
    one("concurrency TTFT", sm("concurrency", "ttft_mean_s"))
    two(
        "disaggregated TPOT / TTFT, workers stated (closed form, not fitted)",
        lambda r: sm("disaggregated", "tpot_mean_s")(r) and not assumed_layout(r),
        lambda r: sm("disaggregated", "ttft_mean_s")(r) and not assumed_layout(r),
    )
    two(
        "disaggregated TPOT / TTFT, worker layout assumed",
        lambda r: sm("disaggregated", "tpot_mean_s")(r) and assumed_layout(r),
        lambda r: sm("disaggregated", "ttft_mean_s")(r) and assumed_layout(r),
    )
    two("server TTFT / ITL", sm("server", "ttft_mean_s"), sm("server", "itl_mean_s"))
    two(
        "single-stream TTFT / tok/s",
        sm("single_stream", "ttft_mean_s"),
        sm("single_stream", "tokens_per_s_single_stream"),
    )
    two(
        "kernel decode / prefill step",
        sm("kernel", "decode_step_s"),
        sm("kernel", "prefill_time_s"),
    )
    one("speculative speedup (at measured acceptance)", sm("speculative", "speedup"))
    one("**every throughput row**", lambda r: "throughput" in r["metric"])
    one("**every TPOT row**", lambda r: r["metric"] == "tpot_mean_s")
    one("**every TTFT row**", lambda r: r["metric"] == "ttft_mean_s")
    one("all rows", lambda r: True)
    one(
        "nothing assumed (weights and layout stated)",
        lambda r: not r["assumed_weights"] and not assumed_layout(r),
    )
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("readme", "docs"):
        print(
            "usage: python benchmarks/validate_tables.py readme|docs < validate.json",
            file=sys.stderr,
        )
        return 2
    rows = json.load(sys.stdin)["rows"]
    print("\n".join(readme_table(rows) if argv[1] == "readme" else docs_table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
