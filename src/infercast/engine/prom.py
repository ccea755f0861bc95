"""Prometheus metrics of the server (vLLM-like names under ``infercast_``).

One ``CollectorRegistry`` per server (no global registry), so tests can run
several servers in one process. Gauges read the engine when scraped; counters
and histograms are fed the finished :class:`RequestRecord` s on the engine thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from infercast.metrics.records import RequestRecord

# Latency buckets in seconds: CPU steps run from milliseconds to seconds.
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5)


class ServerMetrics:
    """The registry and its instruments."""

    def __init__(self, engine) -> None:
        r = self.registry = CollectorRegistry()
        Gauge(
            "infercast_num_requests_running", "Requests in the running batch", registry=r
        ).set_function(lambda: engine.num_running)
        Gauge(
            "infercast_num_requests_waiting", "Requests waiting to be scheduled", registry=r
        ).set_function(lambda: engine.num_waiting)
        Gauge(
            "infercast_kv_cache_usage_ratio", "Fraction of KV blocks in use (0-1)", registry=r
        ).set_function(lambda: engine.kv_usage)
        self.prompt_tokens = Counter(
            "infercast_prompt_tokens", "Prompt tokens of finished requests", registry=r
        )
        self.generation_tokens = Counter(
            "infercast_generation_tokens", "Output tokens of finished requests", registry=r
        )
        self.requests = Counter(
            "infercast_request_finished",
            "Finished requests by reason",
            ["finished_reason"],
            registry=r,
        )
        self.ttft = Histogram(
            "infercast_time_to_first_token_seconds", "TTFT", buckets=_TTFT_BUCKETS, registry=r
        )
        self.tpot = Histogram(
            "infercast_time_per_output_token_seconds",
            "TPOT per request",
            buckets=_TPOT_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "infercast_e2e_request_latency_seconds",
            "Arrival to last token",
            buckets=_TTFT_BUCKETS,
            registry=r,
        )

    def observe(self, records: Iterable[RequestRecord]) -> None:
        for rec in records:
            self.prompt_tokens.inc(rec.prompt_tokens)
            self.generation_tokens.inc(rec.output_tokens)
            self.requests.labels(rec.finish_reason or "unknown").inc()
            for hist, value in (
                (self.ttft, rec.ttft_s),
                (self.tpot, rec.tpot_s),
                (self.e2e, rec.e2e_s),
            ):
                if value is not None:
                    hist.observe(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)
