"""The score tables of README.md and docs/accuracy.md: the default ``infercast validate``'s.

    python benchmarks/validate_tables.py readme          # README "Validation" table
    python benchmarks/validate_tables.py docs            # docs/accuracy.md "Current scores"
    python benchmarks/validate_tables.py regenerate [--workers W]

The default predicts the serving rows by simulation (``Evaluator(prefer_simulator=True)``,
``--fast`` off), which takes minutes: too long for the test that keeps the tables honest. So the
simulated rows' predictions are recorded in ``benchmarks/validate_simulated.csv`` (row id, value
or the reason it was skipped, as ``repr`` floats), and the tables are built from the default
path's live predictions of every other row (closed forms, milliseconds) with the recorded ones in
place of the simulations. ``regenerate`` runs every simulation of the default (a pool of ``W``
processes, one per CPU unless given), rewrites the file and both tables in place, and prints how
long the simulations took. ``tests/validate/test_readme_table.py`` checks that both tables are
what the file gives and re-simulates a fixed sample of the file's rows, so a model change that
moves a simulated prediction fails the test until the file is regenerated.

A row counts as "layout assumed" when its notes say so (disaggregated rows without
worker counts, rows whose TP cannot shard the model's heads, runs that drafted with MTP, which the
simulator runs without it); "nothing assumed" is
every row with a stated weight dtype and no assumed layout.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "validate_simulated.csv"
TABLES = {  # file -> the first line of its table (the table runs while lines start with "|")
    "readme": (ROOT / "README.md", "| scenario / metric | rows | coverage | median abs err |"),
    "docs": (
        ROOT / "docs" / "accuracy.md",
        "| scenario / metric | rows | coverage | median abs err | within 25 % |",
    ),
}
ASSUMED_LAYOUT = (
    "worker counts not stated",
    "attention data parallel assumed",
    "MTP not simulated",
)


def assumed_layout(r: dict) -> bool:
    return any(marker in n for n in r["notes"] for marker in ASSUMED_LAYOUT)


def stated(r: dict) -> bool:
    """Nothing assumed: the row states its weight dtype and its layout (issue 15's goal set)."""
    return not r["assumed_weights"] and not assumed_layout(r)


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
        "kernel/mixed_step_s",
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
            f"concurrency {label}, weights and layout stated",
            lambda r, m=m: scenario_metric("concurrency", m)(r) and stated(r),
        )
    for m, label in (("tpot_mean_s", "TPOT"), ("ttft_mean_s", "TTFT")):
        line(
            f"disaggregated {label}, workers stated",
            lambda r, m=m: scenario_metric("disaggregated", m)(r) and not assumed_layout(r),
        )
    line("all rows", lambda r: True)
    line("all rows but disaggregated", lambda r: r["scenario"] != "disaggregated")
    line(
        "nothing assumed (stated weights and layout)",
        stated,
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
        "concurrency TPOT / TTFT, weights and layout stated",
        lambda r: sm("concurrency", "tpot_mean_s")(r) and stated(r),
        lambda r: sm("concurrency", "ttft_mean_s")(r) and stated(r),
    )
    two(
        "disaggregated TPOT / TTFT, workers stated (not fitted)",
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
    one("kernel chunked-prefill (mixed) step", sm("kernel", "mixed_step_s"))
    one("speculative speedup (at measured acceptance)", sm("speculative", "speedup"))
    one("**every throughput row**", lambda r: "throughput" in r["metric"])
    one("**every TPOT row**", lambda r: r["metric"] == "tpot_mean_s")
    one("**every TTFT row**", lambda r: r["metric"] == "ttft_mean_s")
    one("all rows", lambda r: True)
    one(
        "nothing assumed (weights and layout stated)",
        stated,
    )
    return out


def default_evaluator(cases=None):
    """``infercast validate``'s default: serving rows by simulation, a missing weight dtype taken
    from the checkpoint, each row's own engine preset."""
    from infercast.validate.cases import load_cases
    from infercast.validate.evaluate import Evaluator

    return Evaluator(
        load_cases() if cases is None else cases, prefer_simulator=True, assume_weights="checkpoint"
    )


def simulated(ev) -> list[int]:
    """Indices of the rows the default predicts by simulation."""
    return [i for i, p in enumerate(ev.plans) if p is not None and p.simulate is not None]


def read_recorded(path: Path = RECORDED) -> dict[str, tuple[float | None, str | None]]:
    """Row id -> (recorded prediction, or None and the reason it was skipped)."""
    with path.open(newline="") as f:
        return {
            r["id"]: (
                float(r["predicted"]) if r["predicted"] else None,
                r["skipped_reason"] or None,
            )
            for r in csv.DictReader(f)
        }


def default_predictions(recorded: dict | None = None, cases=None) -> list:
    """Every row's Prediction as the default gives it: live for the rows it does not simulate,
    ``recorded`` (the file's, unless given) for those it does; each simulated row's closed form
    (``--fast``) beside it, computed live."""
    from infercast.cost.profiles import load_profile_set
    from infercast.validate.evaluate import Evaluator, SimFailure

    recorded = read_recorded() if recorded is None else recorded
    profiles = load_profile_set(None)
    ev = default_evaluator(cases)
    sims = simulated(ev)
    placeholder = SimFailure("recorded")  # fills the cache: no simulation runs
    cache = {
        (ev.plans[i].sim_key, profiles.for_group(ev.plans[i].group)): placeholder for i in sims
    }
    preds = ev.predict(profiles, sim_cache=cache)
    from infercast.validate.cases import load_cases

    fast = Evaluator(load_cases() if cases is None else cases, assume_weights="checkpoint")
    closed = fast.predict(profiles)
    missing = [preds[i].case.id for i in sims if preds[i].case.id not in recorded]
    if missing:
        raise SystemExit(
            f"{len(missing)} simulated rows are not in {RECORDED.name} (first: {missing[0]}): "
            "run `python benchmarks/validate_tables.py regenerate`"
        )
    for i in sims:
        p = preds[i]
        value, reason = recorded[p.case.id]
        cf = closed[i].predicted if ev.plans[i].combine is not None else None
        preds[i] = dataclasses.replace(p, predicted=value, skipped_reason=reason, closed_form=cf)
    return preds


def _rows(preds) -> list[dict]:
    from infercast.validate.score import report

    return report(preds, "shipped")["rows"]


def tables() -> dict[str, list[str]]:
    """Both tables, from :func:`default_predictions`."""
    rows = _rows(default_predictions())
    return {"readme": readme_table(rows), "docs": docs_table(rows)}


def splice(text: str, header: str, table: list[str]) -> str:
    """``text`` with the table that starts at ``header`` replaced by ``table``."""
    lines = text.split("\n")
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[:start] + table + lines[end:])


@dataclasses.dataclass(frozen=True)
class Timed:
    """A simulation task that also returns the CPU seconds its process spent on it."""

    task: object

    @property
    def config(self):  # run_simulations pools the tasks that have one (SimTasks), sizes them by it
        return self.task.config

    def __call__(self, profile):
        c0 = time.process_time()
        out = self.task(profile)
        return out, time.process_time() - c0


def regenerate(workers: int | None) -> None:
    """Simulate every row the default simulates (each distinct simulation once, in a pool), record
    them, rewrite both tables; print the wall time and each scenario's simulation CPU seconds."""
    from infercast.cost.profiles import load_profile_set
    from infercast.validate.evaluate import SimFailure, run_simulations

    profiles = load_profile_set(None)
    ev = default_evaluator()
    sims = simulated(ev)
    todo, scenario = {}, {}
    for i in sims:
        plan = ev.plans[i]
        key = (plan.sim_key, profiles.for_group(plan.group))
        todo[key] = (Timed(plan.simulate), key[1])
        scenario.setdefault(key, ev.cases[i].scenario)
    t0 = time.perf_counter()
    done = run_simulations(todo, workers)
    wall = time.perf_counter() - t0
    cache, cpu, each = {}, defaultdict(float), {}
    for key, result in done.items():
        if isinstance(result, SimFailure):
            cache[key] = result
        else:
            cache[key], each[key] = result
            cpu[scenario[key]] += each[key]
    print(
        f"{len(sims):,} simulated rows, {len(todo):,} simulations, {workers or os.cpu_count()} "
        f"workers: wall {wall:.0f} s, simulations' CPU {sum(cpu.values()):.0f} s "
        f"({', '.join(f'{k} {v:.0f}' for k, v in sorted(cpu.items()))}), "
        f"load average {os.getloadavg()}"
    )
    first = {}
    for i in sims:
        first.setdefault(
            (ev.plans[i].sim_key, profiles.for_group(ev.plans[i].group)), ev.cases[i].id
        )
    for key in sorted(each, key=lambda k: -each[k])[:8]:
        print(f"  {each[key]:7.1f} CPU-s  {first[key]}")
    preds = ev.predict(profiles, sim_cache=cache)
    with RECORDED.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["id", "predicted", "skipped_reason"])
        for i in sorted(sims, key=lambda i: preds[i].case.id):
            p = preds[i]
            value = "" if p.predicted is None else repr(p.predicted)
            out.writerow([p.case.id, value, p.skipped_reason or ""])
    print(f"wrote {RECORDED.relative_to(ROOT)}")
    for name, table in tables().items():
        path, header = TABLES[name]
        path.write_text(splice(path.read_text(), header, table))
        print(f"rewrote the table in {path.relative_to(ROOT)}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("readme", "docs", "regenerate"))
    ap.add_argument("--workers", type=int, default=None, help="simulation processes (regenerate)")
    args = ap.parse_args(argv[1:])
    if args.what == "regenerate":
        regenerate(args.workers)
    else:
        print("\n".join(tables()[args.what]))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv))
