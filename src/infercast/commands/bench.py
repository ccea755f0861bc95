"""``infercast bench``: load-test an OpenAI-compatible server and measure it correctly."""

from __future__ import annotations

import math

import typer

from infercast.commands import _options as opts
from infercast.errors import ConfigError, InfercastError


def _floats(text: str | None, flag: str) -> list[float]:
    if not text:
        return []
    try:
        vals = [math.inf if x.strip() == "inf" else float(x) for x in text.split(",")]
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r}: give a number or a comma-separated list, e.g. 1,2,4"
        ) from None
    if any(math.isnan(v) or v <= 0 for v in vals):
        raise ConfigError(f"{flag} {text!r}: values must be numbers > 0")
    return vals


# BenchConfig fields whose flag is not the field's name (vLLM bench serve's vocabulary)
# Library parameters named otherwise than their flag (infercast.errors.with_flags): BenchConfig's
# fields in seconds and counts, and compare's simulator config.
PARAM_FLAGS = {
    "config": "--sim-config",
    "max_duration_s": "--max-duration",
    "slo_ttft_s": "--slo-ttft-ms",
    "slo_tpot_s": "--slo-tpot-ms",
    "timeout_s": "--timeout",
    "warmup_requests": "--warmup",
}


def _config(**kw: object):  # noqa: ANN202 - BenchConfig, imported lazily
    from pydantic import ValidationError

    from infercast.bench.run import BenchConfig

    try:
        return BenchConfig(**kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        where = f"`{field}`" if field else "flags"  # cli.main writes `field` as its flag
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{where}: {msg}" if err["loc"] else msg) from None


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the CLI."""

    @app.command("bench")
    def bench(
        model: str = typer.Option(..., "--model", help="Model name sent in each request."),
        base_url: str = typer.Option(
            "http://127.0.0.1:8000/v1", "--base-url", help="Server URL ending in /v1."
        ),
        endpoint: str = typer.Option("completions", "--endpoint", help="completions | chat"),
        request_rate: str = typer.Option(
            None, "--request-rate", help="Open loop req/s (list = sweep; inf)."
        ),
        concurrency: str = typer.Option(
            None,
            "--max-concurrency",
            help="Closed loop streams (list = sweep); "
            "with --request-rate: a cap on requests in flight.",
        ),
        concurrency_old: opts.OldConcurrency = None,
        burstiness: float = typer.Option(
            1.0, "--burstiness", help="Gamma shape of gaps: 1 Poisson, <1 burstier."
        ),
        ramp_to_rate: float = typer.Option(
            None, "--ramp-to-rate", help="Ramp linearly up to this rate."
        ),
        num_requests: int = typer.Option(
            None, "--num-prompts", "-n", help="Measured requests (default: 200)."
        ),
        num_requests_old: opts.OldNumRequests = None,
        input_tokens: int = typer.Option(
            None,
            "--input-tokens",
            help="Prompt tokens (random dataset; default 128); multi-turn: each new message's.",
        ),
        output_tokens: int = typer.Option(
            None,
            "--output-tokens",
            help="max_tokens asked per request (default 128); multi-turn: each answer's.",
        ),
        conversations: str = typer.Option(
            None,
            "--conversations",
            help="Multi-turn chat sessions: builtin (Mooncake's) | synthetic | sessions CSV; -n "
            "counts sessions, --request-rate is sessions/s; needs --endpoint chat.",
        ),
        turns: int = typer.Option(
            None, "--turns", help="Multi-turn: turns per session (alone: synthetic)."
        ),
        think_time_s: float = typer.Option(
            None,
            "--think-time-s",
            help="Multi-turn: seconds from an answer's last chunk to the next message "
            "(default: the source's).",
        ),
        range_ratio: float = typer.Option(
            0.0, "--range-ratio", help="Lengths uniform in [1-r, 1+r] x given."
        ),
        shared_prefix_tokens: int = typer.Option(
            0, "--shared-prefix-tokens", help="Common prompt prefix."
        ),
        dataset: str = typer.Option(
            None, "--dataset", help="azure-conv | azure-code | trace.csv | sharegpt.json"
        ),
        max_input_tokens: int = typer.Option(
            None, "--max-input-tokens", help="Clip trace prompt lengths."
        ),
        tokenizer: str = typer.Option(
            None, "--tokenizer", help="tokenizer.json: exact prompts and token counts."
        ),
        max_duration: float = typer.Option(
            None, "--max-duration", help="Stop sending after this many seconds."
        ),
        warmup: int = typer.Option(
            1, "--warmup", help="Warm-up requests, excluded from the results."
        ),
        timeout: float = typer.Option(
            600.0, "--timeout", help="Seconds of server silence before a request fails."
        ),
        seed: int = typer.Option(0, "--seed"),
        slo_ttft_ms: float = typer.Option(None, "--slo-ttft-ms", help="TTFT limit for goodput."),
        slo_tpot_ms: float = typer.Option(None, "--slo-tpot-ms", help="TPOT limit for goodput."),
        slo_attainment: float = typer.Option(
            0.9, "--slo-attainment", help="Fraction that must meet the SLO."
        ),
        search_goodput: float = typer.Option(
            None, "--search-goodput", help="Search rates up to this for goodput."
        ),
        percentiles: str = typer.Option("50,90,99", "--percentiles"),
        ignore_eos: bool = typer.Option(True, "--ignore-eos/--no-ignore-eos"),
        api_key: str = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY"),
        json_out: bool = typer.Option(
            False, "--json", help="Print one JSON object (vLLM's keys + ours)."
        ),
        jsonl: str = typer.Option(
            None, "--jsonl", help="Write every request record to this JSONL file."
        ),
        plot: str = typer.Option(None, "--plot", help="Write latency plots to this PNG."),
        compare_sim: bool = typer.Option(
            False, "--compare-sim", help="Also simulate this workload; side by side."
        ),
        sim_model: str = typer.Option(
            None, "--sim-model", help="Simulated model (default: --model)."
        ),
        sim_hardware: str = typer.Option(
            None, "--sim-hardware", help="Simulated hardware (needed by --compare-sim)."
        ),
        sim_weights: str = typer.Option(
            "bf16", "--sim-weights", help="Simulated weight precision."
        ),
        sim_config: str = typer.Option(
            None, "--sim-config", help="Simulator config file (scheduler etc.)."
        ),
        hardware: str = typer.Option(
            None, "--hardware", help="Part the server runs on: its shipped price for $ figures."
        ),
        gpus: int = typer.Option(
            1, "--gpus", help="GPUs the server uses (dollars = GPUs x wall time x price)."
        ),
        price: float = typer.Option(
            None, "--price", help="$/GPU-hour (default: the shipped price of --hardware)."
        ),
        profile: str = typer.Option(None, "--profile", help=f"--compare-sim: {opts.PROFILE_HELP}"),
        engine: str = typer.Option(None, "--engine", help=f"--compare-sim: {opts.ENGINE_HELP}"),
    ) -> None:
        """Measure TTFT, TPOT, ITL, E2E, throughput and goodput of an OpenAI-compatible server."""
        from infercast.bench.dollars import bench_price
        from infercast.bench.run import run_bench
        from infercast.bench.run import search_goodput as search
        from infercast.commands._common import renamed
        from infercast.report.console import make_console
        from infercast.validation import check_plot_path, check_writable

        check_writable(jsonl, "--jsonl")
        check_plot_path(plot, "--plot")

        concurrency = renamed(concurrency, concurrency_old, "--max-concurrency", "--concurrency")
        num_requests = renamed(num_requests, num_requests_old, "--num-prompts", "--num-requests")
        num_requests = 200 if num_requests is None else num_requests  # 0 is bad, not "default"
        price_per_hour, price_source = bench_price(hardware, price)
        if gpus < 1:
            raise ConfigError(f"--gpus must be >= 1, got {gpus}")
        if endpoint not in ("completions", "chat"):
            raise ConfigError(f"--endpoint {endpoint!r}: use completions or chat")
        if compare_sim and not sim_hardware:
            raise ConfigError("--compare-sim needs --sim-hardware NAME (see 'infercast hardware')")
        rates, concs = (
            _floats(request_rate, "--request-rate"),
            _floats(concurrency, "--max-concurrency"),
        )
        if len(rates) > 1 and len(concs) > 1:
            raise ConfigError("sweep either --request-rate or --max-concurrency, not both")
        if any(not c.is_integer() for c in concs if math.isfinite(c)) or math.inf in concs:
            raise ConfigError(f"--max-concurrency {concurrency!r}: give whole numbers")
        base = _config(
            base_url=base_url,
            model=model,
            endpoint=endpoint,
            burstiness=burstiness,
            request_rate=rates[0] if rates else (search_goodput or None),
            concurrency=int(concs[0]) if concs else None,
            ramp_to_rate=ramp_to_rate,
            num_requests=num_requests,
            input_tokens=128 if input_tokens is None else input_tokens,
            output_tokens=128 if output_tokens is None else output_tokens,
            input_tokens_given=input_tokens is not None,
            output_tokens_given=output_tokens is not None,
            conversations=conversations,
            turns=turns,
            think_time_s=think_time_s,
            range_ratio=range_ratio,
            shared_prefix_tokens=shared_prefix_tokens,
            dataset=dataset,
            max_input_tokens=max_input_tokens,
            tokenizer=tokenizer,
            max_duration_s=max_duration,
            warmup_requests=warmup,
            timeout_s=timeout,
            seed=seed,
            slo_ttft_s=slo_ttft_ms / 1e3 if slo_ttft_ms else None,
            slo_tpot_s=slo_tpot_ms / 1e3 if slo_tpot_ms else None,
            percentiles=tuple(_floats(percentiles, "--percentiles")),
            ignore_eos=ignore_eos,
            api_key=api_key,
        )
        points = (
            [{"request_rate": r} for r in rates]
            if len(rates) > 1
            else [{"concurrency": int(c)} for c in concs]
            if len(concs) > 1
            else [{}]
        )
        target = None
        if compare_sim:  # the simulator's inputs are checked before the benchmark, not after it
            from infercast.bench.compare import SimTarget, check_sim_inputs
            from infercast.errors import UnknownModelError

            target = SimTarget(
                sim_model or model, sim_hardware, sim_weights, sim_config, profile, engine
            )
            try:
                for p in points:
                    check_sim_inputs(base.model_copy(update=p), target)
            except UnknownModelError as exc:
                if sim_model:
                    raise
                raise UnknownModelError(
                    f"--compare-sim simulates --model by default: {exc}; or pass --sim-model PRESET"
                ) from None
        console = make_console(stderr=json_out)
        best_rate = None
        total = None if search_goodput is not None else num_requests * len(points)
        with _progress(console, total) as bar:
            if search_goodput is not None:
                best_rate, results = search(base, search_goodput, slo_attainment, on_done=bar)
            else:
                results = [run_bench(base.model_copy(update=p), on_done=bar) for p in points]
        _measured_something(results, base_url)
        compared = _compare(results, target)
        if jsonl:
            from infercast.bench.jsonl import write_jsonl

            write_jsonl(results, jsonl)
        if plot:
            from infercast.report.bench_plots import plot_bench

            plot_bench(results, plot)
        if price_per_hour is not None:
            from infercast.bench.dollars import run_dollars

            for i, r in enumerate(results):
                compared.setdefault(i, {})["dollars"] = {
                    **run_dollars(r.summary, r.records, gpus, price_per_hour),
                    "gpus": gpus,
                    "price_source": price_source,
                }
        emit = _emit_json if json_out else _emit_console
        emit(results, compared, best_rate, slo_attainment, console)


def _measured_something(results: list, base_url: str) -> None:
    """Exit 2 with the failure reasons when no request of any run succeeded."""
    from collections import Counter

    records = [rec for r in results for rec in r.records]
    if any(rec.ok for rec in records):
        return
    reasons = Counter(rec.error or rec.finish_reason or "no output" for rec in records)
    top = ", ".join(f"{why} x{n}" for why, n in reasons.most_common(3)) or "no request was sent"
    raise InfercastError(
        f"nothing was measured: {len(records)} requests, none succeeded "
        f"({top}); is an OpenAI-compatible server answering at {base_url}?"
    )


def _compare(results: list, target) -> dict[int, dict]:
    """Simulated counterpart of each run on ``target`` (``--compare-sim``; a SimTarget or None),
    keyed by run index."""
    if target is None:
        return {}
    from infercast.bench.compare import comparison, lockstep_note, replays, run_sim

    out = {}
    for i, r in enumerate(results):
        out[i] = {
            "simulated": target.label
            + (", the measured requests replayed" if replays(r.config, r.records) else ""),
            "rows": comparison(r.summary, run_sim(r.config, target, r.turns, r.records)),
        }
        note = lockstep_note(r.config)
        if note:
            out[i]["note"] = note
    return out


def _emit_json(
    results: list, compared: dict, best_rate: float | None, attainment: float, console
) -> None:
    """One JSON object on stdout (a sweep: ``{"sweep": [...]}``); warnings on stderr."""
    import json

    from infercast.commands._meta import run_meta

    meta = run_meta()
    # vLLM writes the run's local date as "%Y%m%d-%H%M%S"; ISO 8601 (UTC) stays in meta.
    date = meta["date"].replace("-", "").replace(":", "").replace("T", "-")[:15]
    docs = [{"date": date, **r.to_json()} for r in results]
    for i, comp in compared.items():
        comp = dict(comp)
        if "dollars" in comp:
            docs[i]["dollars"] = comp.pop("dollars")
        if comp:
            docs[i]["compare_sim"] = comp
    out: dict = docs[0] if len(docs) == 1 else {"sweep": docs}
    if best_rate is not None:
        out = {
            "goodput_search": {"max_rate_meeting_slo": best_rate, "slo_attainment": attainment},
            "sweep": docs,
        }
    print(json.dumps({"meta": meta, **out}, indent=1, default=str))
    for r in results:
        for w in r.warnings:
            console.print(f"[bold red]WARNING:[/] {w}")


def _emit_console(
    results: list, compared: dict, best_rate: float | None, attainment: float, console
) -> None:
    """Rich tables: each run (and its simulated counterpart), then the sweep."""
    from infercast.report import bench_tables as report

    for i, r in enumerate(results):
        report.print_result(r, console)
        if "rows" in compared.get(i, {}):
            console.print(report.comparison_table(compared[i]["rows"], compared[i]["simulated"]))
            if "note" in compared[i]:
                console.print(f"[yellow]note:[/] {compared[i]['note']}")
        if "dollars" in compared.get(i, {}):
            console.print(report.dollars_line(compared[i]["dollars"]))
    if len(results) > 1:
        console.print(report.sweep_table(results))
    if best_rate is not None:
        console.print(
            f"highest rate meeting the SLO for {attainment:.0%} of requests: [bold]{best_rate:.3g} "
            "req/s[/]"
        )


class _progress:
    """A Rich progress bar advanced once per finished request (callable as on_done)."""

    def __init__(self, console: object, total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("requests"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("bench", total=total, failed=0)
        self.failed = 0

    def __enter__(self) -> _progress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, rec: object) -> None:
        self.failed += 0 if getattr(rec, "ok", True) else 1
        self.progress.update(self.task, advance=1, failed=self.failed)
