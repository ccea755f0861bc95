"""One bench run, a sweep of runs, and a search for the highest rate that meets an SLO.

Plain data in, plain data out: :class:`BenchConfig` (frozen, validated) ->
:func:`run_bench` -> :class:`BenchResult` (records, :class:`Summary`, client
diagnostics, warnings), whose :meth:`BenchResult.to_json` uses vLLM ``bench
serve``'s key names where they exist, plus ours.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from infercast.bench import loops
from infercast.bench.client import BenchClient, ClientConfig
from infercast.bench.datasets import (
    SHIPPED_TRACES,
    RequestSpec,
    load_tokenizer,
    random_specs,
    sharegpt_specs,
    trace_specs,
)
from infercast.bench.load import LoadPlan, LoadResult, client_warnings, run_load
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import MetricsAccumulator, Summary
from infercast.validation import SEED_MAX


class BenchConfig(BaseModel):
    """Everything one run needs (frozen; the CLI builds it from flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str
    endpoint: str = Field("completions", pattern="^(completions|chat)$")
    request_rate: float | None = Field(None, gt=0)
    concurrency: int | None = Field(None, ge=1)
    burstiness: float = Field(1.0, gt=0)
    ramp_to_rate: float | None = Field(None, gt=0)
    num_requests: int = Field(200, ge=1)
    input_tokens: int = Field(128, ge=1)
    output_tokens: int = Field(128, ge=1)
    range_ratio: float = Field(0.0, ge=0, lt=1)
    shared_prefix_tokens: int = Field(0, ge=0)
    dataset: str | None = (
        None  # None: random; azure-conv | azure-code | trace .csv/.jsonl | ShareGPT .json
    )
    max_input_tokens: int | None = Field(None, ge=1)
    tokenizer: str | None = None
    max_duration_s: float | None = Field(None, gt=0)
    warmup_requests: int = Field(1, ge=0)
    timeout_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    seed: int = Field(0, ge=0, le=SEED_MAX)
    slo_ttft_s: float | None = Field(None, gt=0)
    slo_tpot_s: float | None = Field(None, gt=0)
    percentiles: tuple[float, ...] = (50.0, 90.0, 99.0)
    ignore_eos: bool = True
    api_key: str | None = None
    # Multi-turn sessions (bench/conversations.py): num_requests counts sessions, request_rate is
    # sessions/s; input/output tokens are each message's and answer's, replacing the source's
    # lengths when given (*_given).
    conversations: str | None = None  # builtin | synthetic | sessions CSV
    turns: int | None = Field(None, ge=1)
    think_time_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    input_tokens_given: bool = False
    output_tokens_given: bool = False

    @model_validator(mode="after")
    def _load_given(self) -> BenchConfig:
        if self.request_rate is None and self.concurrency is None and not self.is_trace:
            raise ValueError("give --request-rate R or --max-concurrency C")
        if any(not 0 < q <= 100 for q in self.percentiles):
            raise ValueError(
                f"--percentiles {','.join(f'{q:g}' for q in self.percentiles)}: "
                "each must be above 0 and at most 100"
            )
        for name in (
            "burstiness",
            "ramp_to_rate",
            "max_duration_s",
            "slo_ttft_s",
            "slo_tpot_s",
            "range_ratio",
        ):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"--{name.removesuffix('_s').replace('_', '-')} must be finite")
        # a client per stream costs memory and connections: one that can never get a request
        # (1e5 streams for 4 requests took 55 s and 676 MB) is refused before any is opened
        if (
            self.concurrency is not None
            and self.concurrency > self.num_requests + self.warmup_requests
        ):
            raise ValueError(
                f"--max-concurrency {self.concurrency} for {self.num_requests} requests: "
                f"at most {self.num_requests + self.warmup_requests} can be in flight; "
                "lower it or raise --num-prompts"
            )
        if self.multi_turn:
            if self.endpoint != "chat":
                raise ValueError("multi-turn sessions send chat messages: add --endpoint chat")
            if self.dataset is not None:
                raise ValueError("--conversations replaces --dataset: drop one of them")
            if self.request_rate is not None and self.concurrency is not None:
                raise ValueError(
                    "sessions start at --request-rate or run as --max-concurrency users, not both"
                )
            if (self.conversations or "synthetic") == "synthetic" and self.turns is None:
                raise ValueError(
                    "synthetic sessions need --turns (or --conversations builtin|FILE)"
                )
        url = urlsplit(self.base_url)
        try:
            url.port  # noqa: B018 - raises ValueError on a port out of range
        except ValueError:
            url = urlsplit("")
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(
                f"--base-url {self.base_url!r} is not an http(s) URL; use e.g. "
                "http://127.0.0.1:8000/v1"
            )
        return self

    @property
    def multi_turn(self) -> bool:
        """True for a run of multi-turn sessions."""
        return (
            self.conversations is not None
            or self.turns is not None
            or self.think_time_s is not None
        )

    @property
    def is_trace(self) -> bool:
        return bool(self.dataset) and (
            self.dataset in SHIPPED_TRACES or self.dataset.endswith((".csv", ".jsonl", ".ndjson"))
        )


@dataclass
class BenchResult:
    """One run: its config, records, summary and what the client saw of itself."""

    config: BenchConfig
    summary: Summary
    load: LoadResult
    warnings: list[str]
    turns: Any = None  # multi-turn runs: every turn sent (bench.conversations._Turns)

    @property
    def records(self) -> list[RequestRecord]:
        return self.load.records

    def to_json(self) -> dict[str, Any]:
        """vLLM's keys (ms, ``duration`` in s) plus infercast's; plain JSON."""
        s, ld = self.summary, self.load
        cfg = self.config
        out: dict[str, Any] = {
            "backend": "openai-chat" if cfg.endpoint == "chat" else "openai",
            "endpoint_type": "openai-chat" if cfg.endpoint == "chat" else "openai",
            "label": None,
            "model_id": cfg.model,
            "tokenizer_id": cfg.tokenizer or cfg.model,
            "base_url": cfg.base_url,
            "dataset_name": cfg.dataset or "random",
            "random_input_len": cfg.input_tokens if cfg.dataset is None else None,
            "random_output_len": cfg.output_tokens,
            "random_range_ratio": cfg.range_ratio,
            "random_prefix_len": cfg.shared_prefix_tokens,
            "seed": cfg.seed,
            "request_rate": cfg.request_rate or math.inf,
            "max_concurrency": cfg.concurrency,
            "burstiness": cfg.burstiness,
            "num_prompts": cfg.num_requests,
            "conversations": (cfg.conversations or "synthetic") if cfg.multi_turn else None,
            "turns": cfg.turns,
            "think_time_s": cfg.think_time_s,
        }
        out.update(s.to_vllm_dict())
        out.update(per_request_arrays(ld.records))
        lag = ld.loop_lag_s
        out.update(
            {
                "token_count_source": s.token_count_source,
                "token_count_sources": s.token_count_sources,
                "token_count_mismatches": sum(1 for r in ld.records if r.token_count_mismatch),
                "failure_reasons": s.failure_reasons,
                "mean_time_to_first_answer_ms": _ms(s.time_to_first_answer.mean),
                "mean_itl_chunk_ms": _ms(s.itl_chunk.mean),
                "tokens_per_chunk": _plain(s.tokens_per_chunk),
                "achieved_concurrency": _plain(ld.achieved_concurrency),
                "max_in_flight": ld.max_in_flight,
                "mean_send_lag_ms": _ms(s.send_lag.mean),
                "p99_send_lag_ms": _ms(s.send_lag.percentiles[99.0])
                if 99.0 in s.send_lag.percentiles
                else None,
                "p99_loop_lag_ms": _ms(float(np.percentile(lag, 99))) if len(lag) else None,
                "client_cpu_fraction": _plain(ld.cpu_fraction),
                "reconnects": ld.reconnects,
                "client_bottleneck": bool(self.warnings),
                "warnings": self.warnings,
                "slo_attainment": _plain(s.slo_attainment)
                if s.slo_attainment is not None
                else None,
                "metrics": s.to_dict(),
            }
        )
        if self.config.is_trace and self.config.request_rate is None:
            out["request_rate"] = f"trace:{self.config.dataset}"  # arrivals replayed from the trace
        elif out["request_rate"] == math.inf:
            out["request_rate"] = "inf"
        return out


def per_request_arrays(records: list[RequestRecord]) -> dict[str, list]:
    """vLLM ``bench serve``'s per-request arrays: lengths, TTFT and ITLs in seconds, errors.

    As vLLM writes them, a failed request has TTFT 0, no ITLs and its error text.
    """
    return {
        "input_lens": [r.prompt_tokens for r in records],
        "output_lens": [r.output_tokens if r.ok else 0 for r in records],
        "ttfts": [_plain(r.ttft_s) or 0.0 if r.ok else 0.0 for r in records],
        "itls": [
            np.diff(np.asarray(r.chunk_times_s, dtype=float)).tolist() if r.ok else []
            for r in records
        ],
        "errors": ["" if r.ok else (r.error or r.finish_reason or "failed") for r in records],
    }


def _plain(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _ms(x: float) -> float | None:
    return _plain(x * 1e3)


def build_specs(
    cfg: BenchConfig, rng: np.random.Generator, tokenizer: Any | None
) -> list[RequestSpec]:
    """The run's requests (warm-up ones first)."""
    n = cfg.num_requests + cfg.warmup_requests
    if cfg.dataset is None:
        return random_specs(
            n,
            cfg.input_tokens,
            cfg.output_tokens,
            rng,
            tokenizer,
            cfg.shared_prefix_tokens,
            cfg.range_ratio,
        )
    if cfg.is_trace:
        specs = trace_specs(cfg.dataset, n, rng, tokenizer, cfg.max_input_tokens)
        # warm-up requests take the trace's first rows; measured arrivals restart at 0
        t0 = specs[min(cfg.warmup_requests, len(specs) - 1)].arrival_s or 0.0
        return [replace(s, arrival_s=max((s.arrival_s or 0.0) - t0, 0.0)) for s in specs]
    if cfg.dataset.endswith(".json"):
        return sharegpt_specs(cfg.dataset, n, rng, tokenizer)
    raise ConfigError(
        f"--dataset {cfg.dataset!r}: give azure-conv, azure-code, a trace .csv or a ShareGPT .json"
    )


async def run_bench_async(
    cfg: BenchConfig, on_done: Callable[[RequestRecord], None] | None = None
) -> BenchResult:
    """Run one benchmark against a live server (:func:`run_bench` runs it on the loop of
    :mod:`infercast.bench.loops`)."""
    rng = np.random.default_rng(cfg.seed)
    tokenizer = load_tokenizer(cfg.tokenizer)
    specs = [] if cfg.multi_turn else build_specs(cfg, rng, tokenizer)
    plan = LoadPlan(
        request_rate=cfg.request_rate,
        concurrency=cfg.concurrency,
        burstiness=cfg.burstiness,
        ramp_to_rate=cfg.ramp_to_rate,
        replay_arrivals=cfg.is_trace and cfg.request_rate is None,
        max_duration_s=cfg.max_duration_s,
        warmup_requests=cfg.warmup_requests,
    )
    ccfg = ClientConfig(
        base_url=cfg.base_url,
        model=cfg.model,
        endpoint=cfg.endpoint,
        timeout_s=cfg.timeout_s,
        ignore_eos=cfg.ignore_eos,
        api_key=cfg.api_key,
    )
    turns = None
    async with BenchClient(ccfg, tokenizer) as client:
        if cfg.multi_turn:
            from infercast.bench.conversations import (
                _Turns,
                conversation_sessions,
                run_conversations,
            )

            turns = _Turns()
            sessions = conversation_sessions(cfg, rng)
            load = await run_conversations(client, sessions, cfg, rng, on_done, turns)
        else:
            load = await run_load(client, specs, plan, rng, on_done)
    acc = MetricsAccumulator(cfg.percentiles, cfg.slo_ttft_s, cfg.slo_tpot_s)
    for rec in load.records:
        acc.add(rec)
    summary = acc.summary(duration_s=load.window_s)
    lag90 = float(np.percentile(summary_send_lags(load), 90)) if load.records else 0.0
    # sessions pause between turns: fewer streams in flight than users is the workload, not the
    # client's fault
    warn_plan = replace(plan, concurrency=None) if cfg.multi_turn else plan
    warnings = client_warnings(warn_plan, load, lag90)
    return BenchResult(cfg, summary, load, warnings, turns)


def summary_send_lags(load: LoadResult) -> np.ndarray:
    """Actual minus scheduled send time of every measured request (s)."""
    return np.array([r.send_s - r.arrival_s for r in load.records if r.send_s is not None] or [0.0])


def run_bench(
    cfg: BenchConfig, on_done: Callable[[RequestRecord], None] | None = None
) -> BenchResult:
    """Synchronous wrapper of :func:`run_bench_async` (on uvloop where installed)."""
    return loops.run(run_bench_async(cfg, on_done), eager_body_writes=True)


def sweep(
    cfg: BenchConfig,
    rates: list[float] | None = None,
    concurrencies: list[int] | None = None,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> list[BenchResult]:
    """One run per rate (open loop) or per concurrency (closed loop), in the order given."""
    points = [{"request_rate": r} for r in rates or []] + [
        {"concurrency": c} for c in concurrencies or []
    ]
    return [run_bench(cfg.model_copy(update=p), on_done) for p in points]


def meets_slo(result: BenchResult, attainment: float) -> bool:
    """True when the fraction of requests meeting every SLO is at least ``attainment``."""
    got = result.summary.slo_attainment
    return got is not None and got >= attainment


def search_goodput(
    cfg: BenchConfig,
    rate_max: float,
    attainment: float = 0.9,
    steps: int = 6,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> tuple[float, list[BenchResult]]:
    """Highest request rate in (0, rate_max] whose SLO attainment >= ``attainment`` (bisection).

    DistServe's goodput: the maximum rate at which the given fraction of
    requests meets both the TTFT and the TPOT limits. Returns (rate, runs);
    rate 0 means even the lowest rate tried missed.
    """
    if cfg.slo_ttft_s is None and cfg.slo_tpot_s is None:
        raise ConfigError("--search-goodput needs --slo-ttft-ms and/or --slo-tpot-ms")
    runs = [
        run_bench(cfg.model_copy(update={"request_rate": rate_max, "concurrency": None}), on_done)
    ]
    if meets_slo(runs[0], attainment):
        return rate_max, runs
    lo, hi = 0.0, rate_max
    for _ in range(steps):
        mid = (lo + hi) / 2
        runs.append(
            run_bench(cfg.model_copy(update={"request_rate": mid, "concurrency": None}), on_done)
        )
        lo, hi = (mid, hi) if meets_slo(runs[-1], attainment) else (lo, mid)
    return lo, runs
