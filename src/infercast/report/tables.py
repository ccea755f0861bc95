"""Rich tables for people; JSON is the machine-readable twin (``to_dict``)."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infercast.cost.memory import fit_suggestions
from infercast.estimate import Estimate
from infercast.report.console import make_console
from infercast.units import GB, GiB, fmt_bytes, fmt_si, fmt_time


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"${x:,.3f}"


def estimate_tables(est: Estimate) -> Group:
    """Header, memory plan, prefill and the decode-vs-batch table (the seed's table, itemised)."""
    m, h, mem = est.model, est.hardware, est.step_model.memory
    prec = est.step_model.precision
    head = Text.assemble(
        (f"{m.name}", "bold"),
        f" ({m.total_params / 1e9:,.2f}B params, {m.active_params / 1e9:,.2f}B active, "
        f"{m.kv_bytes_per_token(prec.kv_bytes):,.0f} KV bytes/token)\n",
        (f"{h.name}", "bold"),
        f" x{est.num_gpus} (TP {est.parallel.tp}, PP {est.parallel.pp}): "
        f"{fmt_si(h.memory_bandwidth_bytes_per_s, 'B/s')}, "
        f"{fmt_si(est.step_model.machine.peak_flops, 'FLOP/s')} {prec.compute}, "
        f"{h.memory_bytes / GB:,.0f} GB ({h.memory_bytes / GiB:,.1f} GiB)\n",
        f"precision {prec.label}"
        f"{'; ' + est.step_model.experts.label if est.step_model.experts else ''}; mode: "
        f"{'floor (physics only)' if est.use_floor else 'expected (floor / efficiency + overhead)'}"
        f"{'' if est.use_floor else f', profile {est.step_model.profile.name}'}",
    )
    memt = Table(title="Memory per GPU", show_header=False, title_justify="left")
    memt.add_row("weights", fmt_bytes(mem.weight_bytes))
    memt.add_row("activation reserve", fmt_bytes(mem.activation_bytes))
    memt.add_row("available (x memory fraction)", fmt_bytes(mem.available_bytes))
    memt.add_row(
        "KV budget",
        fmt_bytes(max(mem.kv_budget_bytes, 0)) + f" = {mem.kv_capacity_tokens:,} tokens",
    )
    memt.add_row(f"max batch at context {est.context}", f"{mem.max_batch(est.context):,}")
    pre = est.prefill
    pret = Table(
        title=f"Prefill of {est.prompt_tokens} tokens (TTFT, unloaded)", title_justify="left"
    )
    for col in ("floor", "expected", "bound", "FLOP/byte", "tokens/s"):
        pret.add_column(col, justify="right")
    pret.add_row(
        fmt_time(pre.floor_time_s),
        fmt_time(pre.time_s),
        pre.bound,
        f"{pre.intensity:,.0f}",
        f"{est.prompt_tokens / est.ttft_s:,.0f}",
    )
    multi = len({d.context for d in est.decode}) > 1
    # Two-line headers and no vertical rules: the table reads at 80 columns (the Quickstart's).
    dec = Table(
        title="Decode (step times in ms)"
        if multi
        else f"Decode at context {est.context} (step times in ms)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    if multi:
        dec.add_column("ctx", justify="right")
    for col in (
        "batch",
        "floor",
        "expected",
        "tok/s",
        "tok/s\nper user",
        "bound",
        "FLOP\n/byte",
        "fits",
        "$/M out\ntokens",
    ):
        dec.add_column(col, justify="right", no_wrap=True)
    for d in est.decode:
        fit = "yes" if d.fits else Text(f"NO {d.required_bytes / GB:,.0f}GB", style="bold red")
        dec.add_row(
            *([str(d.context)] if multi else []),
            str(d.batch),
            f"{d.floor_step_time_s * 1e3:,.2f}",
            f"{d.step_time_s * 1e3:,.2f}",
            f"{d.tokens_per_s:,.0f}",
            f"{d.tokens_per_s_per_user:,.1f}",
            d.cost.bound,
            f"{d.cost.intensity:,.1f}",
            fit,
            _money(d.cost_per_million_output_tokens),
        )
    parts = [head, memt, pret, dec] + _energy_table(est)
    price = (
        f"${est.price_per_hour:,.2f}/GPU-hour ({h.price_source})"
        if est.price_per_hour is not None
        else "no price: pass --price"
    )
    foot = [
        "floor: physics (compulsory bytes / bandwidth, FLOPs / peak, per op); expected: the floor "
        "at measured efficiency plus step overhead"
    ]
    first = est.decode[0]
    # (params x bytes + KV) / bandwidth reads every expert of an MoE model: no useful check there
    if not m.is_moe:
        foot.append(
            f"back-of-envelope (weights + KV) / bandwidth at batch {first.batch}: "
            f"{first.seed_formula_time_s * 1e3:,.2f} ms (it also counts the embedding table as "
            "read)"
        )
    foot.append(f"price: {price}; $/M input tokens {_money(est.cost_per_million_input_tokens)}")
    foot += [f"note: {n}" for n in est.notes]
    bad = [d for d in est.decode if not d.fits]
    if bad:
        foot.append(
            f"batch {bad[0].batch} at context {bad[0].context} does not fit: "
            f"{mem.shortfall_message(bad[0].batch, bad[0].context)}"
        )
        worst = max(bad, key=lambda d: (d.batch, d.context))
        tips = fit_suggestions(mem, worst.batch, worst.context, est.parallel, prec)
        foot.append(f"to fit batch {worst.batch} at context {worst.context}: " + "; or ".join(tips))
    parts.append(Text("\n".join(foot)))
    return Group(*parts)


def _energy_table(est: Estimate) -> list[Table]:
    """Joules per token and watts per decode batch (cost/energy.py); none without power figures."""
    if est.power is None:
        return []
    pw = est.power
    t = Table(
        title=f"Energy per replica ({est.num_gpus} GPU; idle {pw.idle_w:,.0f} W, memory-bound "
        f"{pw.memory_bound_w:,.0f} W, max {pw.max_w:,.0f} W per GPU)",
        title_justify="left",
    )
    for col in ("batch", "J/out tok", "watts", "kWh/M out"):
        t.add_column(col, justify="right", no_wrap=True)
    for d in est.decode:
        if d.energy:
            e = d.energy
            t.add_row(
                str(d.batch),
                f"{e['joules_per_token']:,.3f}",
                f"{e['average_power_w']:,.0f}",
                f"{e['kwh_per_million_tokens']:,.3f}",
            )
    pre = est.to_dict()["energy"]
    t.caption = (
        f"prefill: {pre['prefill_joules_per_input_token']:,.4f} J/input token at "
        f"{pre['prefill_average_power_w']:,.0f} W; powers: {pw.source}"
    )
    return [t]


def print_estimate(est: Estimate, console: Console | None = None) -> None:
    (console or make_console()).print(estimate_tables(est))


def op_table(est: Estimate, batch: int) -> Table:
    """Per-op ledger of the decode step at ``batch`` (for --ops)."""
    point = next(d for d in est.decode if d.batch == batch and d.context == est.context)
    t = Table(
        title=f"Decode step ledger, batch {batch}, context {est.context} (per GPU, all layers)",
        title_justify="left",
    )
    for col in ("op", "GFLOP", "GB moved", "FLOP/byte", "floor", "expected", "bound"):
        t.add_column(col, justify="right" if col != "op" else "left")
    for o in point.cost.ops:
        t.add_row(
            o.op.name,
            f"{o.op.flops / 1e9:,.2f}",
            f"{o.op.bytes / GB:,.3f}",
            f"{o.op.intensity:,.1f}",
            fmt_time(o.floor_s),
            fmt_time(o.time_s),
            o.bound,
        )
    return t


def what_if_table(rows: list[dict], context: int) -> Table:
    """Levers side by side: TTFT, batch-1 TPOT, and throughput at the largest batch that fits."""
    t = Table(
        title=f"What-if at context {context} (each lever alone, against the baseline)",
        title_justify="left",
    )
    for col in (
        "lever",
        "W/A/KV",
        "TP",
        "TTFT ms",
        "TPOT b=1 ms",
        "bound b=1",
        "max batch",
        "tok/s @max",
        "bound @max",
        "tok/s/GPU @max",
    ):
        t.add_column(col, justify="left" if col in ("lever", "W/A/KV") else "right", no_wrap=True)
    failed = []
    for r in rows:
        if "error" in r:  # the row keeps its place; the reason goes under the table, whole
            failed.append(f"{r['lever']}: {r['error']}")
            t.add_row(r["lever"], Text("see below", style="red"), *["-"] * 8)
            continue
        t.add_row(
            r["lever"],
            f"{r['weights']}/{r['compute']}/{r['kv_cache']}"
            + (f" + {r['experts']} experts" if r.get("experts") else ""),
            str(r["tp"]),
            f"{r['ttft_s'] * 1e3:,.1f}",
            f"{r['tpot_batch1_s'] * 1e3:,.2f}",
            r["bound_batch1"],
            f"{r['max_batch']:,}",
            f"{r['tokens_per_s_max_batch']:,.0f}",
            r["bound_max_batch"] or "-",
            f"{r['tokens_per_s_per_gpu_max_batch']:,.0f}",
        )
    if failed:
        t.caption = "\n".join(f"not evaluated: {f}" for f in failed)
        t.caption_justify = "left"
    return t
