"""Summarize :class:`RequestRecord` streams: latency distributions, throughput, goodput.

One implementation shared by the simulator, the CPU engine and the bench
client, with vLLM ``bench serve``'s definitions (``docs/metrics.md``):

- TTFT = first real token - arrival (or scheduled send);
- TPOT = (E2E - TTFT) / (output tokens - 1), per request, undefined for one token;
- ITL per token: the gap between consecutive chunks divided over the k tokens of
  the later chunk (k values of gap/k); ITL per chunk: the raw gaps;
- E2E = last token - arrival; queueing delay = first scheduled - arrival;
- throughput = completed requests / input / output tokens per second of the
  measured window (first arrival to last finish unless a duration is given);
- goodput = requests per second that meet both a TTFT and a TPOT limit (DistServe).

:class:`MetricsAccumulator` streams: per-request scalars go into float64
columns (8 bytes per request each), per-token ITL into a
:class:`~infercast.metrics.sample.BoundedSample` (exact up to a cap, then a log
histogram with <= 0.5 % relative percentile error).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from infercast.metrics.records import RequestRecord
from infercast.metrics.sample import DEFAULT_EXACT_CAP, BoundedSample

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)
MAX_REASONS = 50  # distinct failure reasons kept; the rest count as "other"


def _pkey(q: float) -> str:
    """Percentile key as vLLM spells it: 99 -> 'p99', 99.9 -> 'p99.9'."""
    return f"p{int(q)}" if float(q).is_integer() else f"p{q}"


def _clean(x: float) -> float | None:
    """A plain float for JSON, None for NaN/inf (undefined)."""
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Distribution:
    """Moments and percentiles of one latency metric, in seconds (NaN when empty)."""

    count: int
    mean: float
    std: float
    min: float
    max: float
    percentiles: dict[float, float]
    exact: bool = True  # False once per-token ITL values were folded into the histogram

    @property
    def median(self) -> float:
        return self.percentiles[50.0]

    def to_dict(self, scale: float = 1.0) -> dict[str, float | int | bool | None]:
        """``{count, mean, std, min, max, p50, p90, p99, ...}`` as plain floats times ``scale``."""
        out: dict[str, float | int | bool | None] = {"count": self.count}
        for name in ("mean", "std", "min", "max"):
            out[name] = _clean(getattr(self, name) * scale)
        for q, v in sorted(self.percentiles.items()):
            out[_pkey(q)] = _clean(v * scale)
        out["exact"] = self.exact
        return out

    @classmethod
    def of(cls, values: np.ndarray, percentiles: Sequence[float]) -> Distribution:
        """Exact distribution of an array (NaNs ignored)."""
        v = values[~np.isnan(values)]
        if not v.size:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, {q: nan for q in percentiles})
        pct = np.percentile(v, list(percentiles))  # numpy 'linear', as vLLM
        return cls(
            int(v.size),
            float(v.mean()),
            float(v.std()),
            float(v.min()),
            float(v.max()),
            {q: float(p) for q, p in zip(percentiles, pct, strict=True)},
        )

    @classmethod
    def of_sample(cls, s: BoundedSample, percentiles: Sequence[float]) -> Distribution:
        """Distribution of a bounded sample (percentiles within its documented error)."""
        exact = s.is_exact
        lo, hi = (s.min, s.max) if s.count else (math.nan, math.nan)
        return cls(s.count, s.mean, s.std, lo, hi, {q: s.percentile(q) for q in percentiles}, exact)


def reason_key(reason: str) -> str:
    """The rule a rejection broke, without the request's own numbers.

    The scheduler writes ``"<rule> (<this request's numbers>)"``; counting on the
    whole text would give every prompt length its own line.
    """
    rule, sep, rest = reason.rpartition(" (")
    return rule if sep and rule and rest.endswith(")") else reason


@dataclass(frozen=True)
class Summary:
    """Everything one run measured; times in seconds, rates per second of ``duration_s``."""

    completed: int
    failed: int
    rejected: int
    failure_reasons: dict[str, int]
    finish_reasons: dict[str, int]
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    ttft: Distribution
    tpot: Distribution
    itl: Distribution  # per token
    itl_chunk: Distribution  # per chunk gap
    e2e: Distribution
    queueing: Distribution
    send_lag: Distribution  # bench: actual send - scheduled send
    time_to_first_answer: Distribution  # bench: to first non-reasoning text
    tokens_per_chunk: float
    token_count_sources: dict[str, int]
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    num_good: int = 0
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    extra: dict[str, object] = field(default_factory=dict)
    # Prefix cache, over the completed requests whose cached-token count is known (the simulator and
    # the engine know every one; a bench run knows those the server reported in its usage).
    cache_known: int = 0  # completed requests with a known count
    cache_known_input_tokens: int = 0  # their prompt tokens
    cached_prompt_tokens: int = 0  # of those, served from the prefix cache
    prefix_hit_requests: int = 0  # requests with at least one cached prompt token

    @property
    def prefix_hit_rate_tokens(self) -> float | None:
        """Cached / all prompt tokens of the requests with a known count; None if none is known."""
        known = self.cache_known_input_tokens
        return self.cached_prompt_tokens / known if known else None

    @property
    def prefix_hit_rate_requests(self) -> float | None:
        """Share of those requests that reused at least one cached block; None if none is known."""
        return self.prefix_hit_requests / self.cache_known if self.cache_known else None

    @property
    def total(self) -> int:
        return self.completed + self.failed + self.rejected

    def _rate(self, n: float) -> float:
        return n / self.duration_s if self.duration_s > 0 else math.nan

    @property
    def request_throughput_rps(self) -> float:
        return self._rate(self.completed)

    @property
    def input_throughput_tps(self) -> float:
        return self._rate(self.total_input_tokens)

    @property
    def output_throughput_tps(self) -> float:
        return self._rate(self.total_output_tokens)

    @property
    def goodput_rps(self) -> float | None:
        """Requests/s meeting every SLO set; None when no SLO was given."""
        if self.slo_ttft_s is None and self.slo_tpot_s is None:
            return None
        return self._rate(self.num_good)

    @property
    def slo_attainment(self) -> float | None:
        """Fraction of all requests (failed count as missing) that met every SLO set."""
        if self.slo_ttft_s is None and self.slo_tpot_s is None:
            return None
        return self.num_good / self.total if self.total else math.nan

    @property
    def token_count_source(self) -> str:
        """The one source of output-token counts, or 'mixed'."""
        used = [k for k, v in self.token_count_sources.items() if v]
        return used[0] if len(used) == 1 else ("mixed" if used else "none")

    def distributions(self) -> dict[str, Distribution]:
        return {
            "ttft_s": self.ttft,
            "tpot_s": self.tpot,
            "itl_s": self.itl,
            "itl_chunk_s": self.itl_chunk,
            "e2e_s": self.e2e,
            "queueing_s": self.queueing,
            "send_lag_s": self.send_lag,
            "time_to_first_answer_s": self.time_to_first_answer,
        }

    def to_dict(self) -> dict[str, object]:
        """Plain-JSON dict in SI units (seconds, per second); undefined values are None."""
        out: dict[str, object] = {
            "completed": self.completed,
            "failed": self.failed,
            "rejected": self.rejected,
            "total": self.total,
            "failure_reasons": dict(self.failure_reasons),
            "finish_reasons": dict(self.finish_reasons),
            "duration_s": _clean(self.duration_s),
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput_rps": _clean(self.request_throughput_rps),
            "input_throughput_tps": _clean(self.input_throughput_tps),
            "output_throughput_tps": _clean(self.output_throughput_tps),
            "total_token_throughput_tps": _clean(
                self._rate(self.total_input_tokens + self.total_output_tokens)
            ),
            "tokens_per_chunk_mean": _clean(self.tokens_per_chunk),
            "token_count_source": self.token_count_source,
            "token_count_sources": dict(self.token_count_sources),
            "slo_ttft_s": self.slo_ttft_s,
            "slo_tpot_s": self.slo_tpot_s,
            "goodput_rps": _clean(self.goodput_rps) if self.goodput_rps is not None else None,
            "slo_attainment": _clean(self.slo_attainment)
            if self.slo_attainment is not None
            else None,
            "cached_prompt_tokens": self.cached_prompt_tokens if self.cache_known else None,
            "prefix_hit_rate_tokens": self.prefix_hit_rate_tokens,
            "prefix_hit_rate_requests": self.prefix_hit_rate_requests,
            "prefix_cache_known_requests": self.cache_known,
        }
        out.update({k: d.to_dict() for k, d in self.distributions().items()})
        out.update(self.extra)
        return out

    def to_vllm_dict(self) -> dict[str, object]:
        """vLLM ``bench serve`` result keys: latencies in ms, ``duration`` in s, rates per s."""
        out: dict[str, object] = {
            "duration": _clean(self.duration_s),
            "completed": self.completed,
            "failed": self.failed + self.rejected,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput": _clean(self.request_throughput_rps),
            "output_throughput": _clean(self.output_throughput_tps),
            "total_token_throughput": _clean(
                self._rate(self.total_input_tokens + self.total_output_tokens)
            ),
        }
        if self.goodput_rps is not None:
            out["request_goodput"] = _clean(self.goodput_rps)
        for name, dist in (
            ("ttft", self.ttft),
            ("tpot", self.tpot),
            ("itl", self.itl),
            ("e2el", self.e2e),
        ):
            out[f"mean_{name}_ms"] = _clean(dist.mean * 1e3)
            out[f"median_{name}_ms"] = _clean(dist.median * 1e3)
            out[f"std_{name}_ms"] = _clean(dist.std * 1e3)
            for q in self.percentiles:
                out[f"{_pkey(q)}_{name}_ms"] = _clean(dist.percentiles[q] * 1e3)
        return out


class _Column:
    """A growable float64 array (amortized O(1) append, 8 bytes per value)."""

    __slots__ = ("data", "n")

    def __init__(self) -> None:
        self.data = np.empty(1024, dtype=np.float64)
        self.n = 0

    def append(self, x: float) -> None:
        if self.n == self.data.size:
            self.data = np.resize(self.data, 2 * self.data.size)
        self.data[self.n] = x
        self.n += 1

    def extend(self, xs: np.ndarray) -> None:
        need = self.n + xs.size
        if need > self.data.size:
            self.data = np.resize(self.data, max(need, 2 * self.data.size))
        self.data[self.n : need] = xs
        self.n = need

    def values(self) -> np.ndarray:
        return self.data[: self.n]

    def distribution(self, percentiles: Sequence[float]) -> Distribution:
        return Distribution.of(self.values(), percentiles)


class _SampledColumn:
    """A per-request column in bounded memory: a :class:`BoundedSample` (NaN values skipped).

    Single values wait in a list and reach the sample ``_BUFFER`` at a time: one array per
    value cost ~20 us a request (a fleet day's whole accumulator)."""

    __slots__ = ("sample", "_buf")
    _BUFFER = 1024

    def __init__(self, cap: int) -> None:
        self.sample = BoundedSample(cap)
        self._buf: list[float] = []

    def append(self, x: float) -> None:
        if x == x:  # not NaN
            buf = self._buf
            buf.append(x)
            if len(buf) >= self._BUFFER:
                self._flush()

    def _flush(self) -> None:
        if self._buf:
            self.sample.add(np.array(self._buf, dtype=np.float64))
            self._buf.clear()

    def extend(self, xs: np.ndarray) -> None:
        self._flush()  # keep the order of the values
        self.sample.add(xs[~np.isnan(xs)])

    def values(self) -> np.ndarray:
        self._flush()
        return self.sample.values()  # raises once folded into the histogram

    def distribution(self, percentiles: Sequence[float]) -> Distribution:
        self._flush()
        return Distribution.of_sample(self.sample, percentiles)


class MetricsAccumulator:
    """Streaming summary of request records in bounded memory.

    >>> acc = MetricsAccumulator(slo_ttft_s=0.5, slo_tpot_s=0.05)
    >>> for rec in records: acc.add(rec)          # doctest: +SKIP
    >>> acc.summary().to_dict()["ttft_s"]["p99"]  # doctest: +SKIP

    Memory: four float64 columns per completed request (TTFT, TPOT, E2E,
    queueing; 32 bytes) plus optional send-lag and first-answer columns, and
    two :class:`BoundedSample` for ITL (per token, per chunk) capped at
    ``itl_exact_cap`` values each (8 bytes per value) before they fold into a
    fixed log histogram (~20 KB).

    ``column_cap`` bounds the per-request columns too (a fleet day of millions of requests):
    each is then a :class:`BoundedSample` of that cap, so memory stays constant; goodput is
    counted as requests arrive, for the constructor's SLOs only (:meth:`count_good`).
    """

    def __init__(
        self,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        slo_ttft_s: float | None = None,
        slo_tpot_s: float | None = None,
        itl_exact_cap: int = DEFAULT_EXACT_CAP,
        column_cap: int | None = None,
    ) -> None:
        qs = sorted({float(q) for q in (*percentiles, 50.0)})
        if any(not 0.0 <= q <= 100.0 for q in qs):
            raise ValueError(f"percentiles {list(percentiles)} must lie in [0, 100]")
        self.percentiles = tuple(qs)
        self.slo_ttft_s, self.slo_tpot_s = slo_ttft_s, slo_tpot_s
        names = ("ttft", "tpot", "e2e", "queueing", "send_lag", "ttfa")
        self._bounded = column_cap is not None
        self._cols: dict[str, _Column | _SampledColumn] = {
            k: _Column() if column_cap is None else _SampledColumn(column_cap) for k in names
        }
        self._num_good = 0  # with ``column_cap``: requests meeting the constructor's SLOs
        # One token per chunk (simulator, engine): per-token ITL = per-chunk gap, kept once in
        # _gaps1. Multi-token chunks (bench): per-token values in _itl_k, raw gaps in _gaps_k.
        self._gaps1 = BoundedSample(itl_exact_cap)
        self._itl_k = BoundedSample(itl_exact_cap)
        self._gaps_k = BoundedSample(itl_exact_cap)
        self.completed = self.failed = self.rejected = 0
        self._failure_reasons: Counter[str] = Counter()
        self._finish_reasons: Counter[str] = Counter()
        self._sources: Counter[str] = Counter()
        self._input_tokens = self._output_tokens = 0
        self._num_chunks = self._chunk_tokens = 0
        self._start_s, self._end_s = math.inf, -math.inf
        # known requests, their prompt tokens, cached tokens, requests with a hit
        self._cache = [0, 0, 0, 0]

    def add(self, rec: RequestRecord) -> None:
        """Account one finished (completed, failed or rejected) request."""
        self._start_s = min(self._start_s, rec.arrival_s)
        end = rec.arrival_s if rec.finish_s is None else max(rec.arrival_s, rec.finish_s)
        if len(rec.chunk_times_s):
            end = max(end, rec.chunk_times_s[-1])
        self._end_s = max(self._end_s, end)
        if rec.send_s is not None:
            self._cols["send_lag"].append(rec.send_s - rec.arrival_s)
        if rec.finish_reason == "rejected":
            self.rejected += 1
            self._reason(reason_key(rec.error or "rejected"))
        elif not rec.ok:
            self.failed += 1
            self._reason(rec.error or rec.finish_reason or "error")
        else:
            self._add_completed(rec)

    def add_many(
        self,
        arrival_s: np.ndarray,
        prompt_tokens: np.ndarray,
        output_tokens: np.ndarray,
        first_token_s: np.ndarray,
        last_token_s: np.ndarray,
        finish_s: np.ndarray,
        first_scheduled_s: np.ndarray,
        finish_reasons: Iterable[str] | None = None,
        cached_prompt_tokens: np.ndarray | None = None,
    ) -> None:
        """Account many completed requests at once, each emitting one token per chunk.

        The same as :meth:`add` of, for request i, a ``RequestRecord`` with
        ``output_tokens[i] >= 1`` tokens from ``first_token_s[i]`` to
        ``last_token_s[i]``, ``chunk_tokens=None``, token count source ``exact``,
        ``finish_reasons[i]`` (default ``length``), ``first_scheduled_s[i]``
        (NaN: unknown) and ``cached_prompt_tokens[i]`` (default 0),
        except the per-token ITL values, which the caller gives
        to :meth:`add_itl`. The simulator's path: numpy columns, no record objects.
        """
        k = int(arrival_s.size)
        if not k:
            return
        counts = np.asarray(output_tokens, dtype=np.int64)
        if counts.min() < 1:
            raise ValueError("add_many: every completed request needs at least one output token")
        first, last = first_token_s, last_token_s
        self._start_s = min(self._start_s, float(arrival_s.min()))
        self._end_s = max(
            self._end_s, float(np.maximum(np.maximum(arrival_s, finish_s), last).max())
        )
        self.completed += k
        if finish_reasons is None:
            self._finish_reasons["length"] += k
        else:
            self._finish_reasons.update(finish_reasons)
        self._sources["exact"] += k
        self._input_tokens += int(prompt_tokens.sum())
        out = int(counts.sum())
        self._output_tokens += out
        ttft = first - arrival_s
        self._cols["ttft"].extend(ttft)
        tpot = np.full(k, math.nan)
        multi = counts > 1
        tpot[multi] = (last[multi] - first[multi]) / (counts[multi] - 1)
        self._cols["tpot"].extend(tpot)
        if self._bounded:
            self._num_good += int(self._good(ttft, tpot, self.slo_ttft_s, self.slo_tpot_s).sum())
        self._cols["e2e"].extend(last - arrival_s)
        known = ~np.isnan(first_scheduled_s)
        self._cols["queueing"].extend((first_scheduled_s - arrival_s)[known])
        c = self._cache
        c[0] += k
        c[1] += int(prompt_tokens.sum())
        if cached_prompt_tokens is not None:
            c[2] += int(cached_prompt_tokens.sum())
            c[3] += int(np.count_nonzero(cached_prompt_tokens))
        self._num_chunks += out
        self._chunk_tokens += out

    def add_itl(self, gaps_s: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Per-token ITL values of one-token chunks, ``gaps_s[i]`` seen ``counts[i]`` times.

        With :meth:`add_many`: the gaps between consecutive tokens of the requests
        it accounted (in any order; a value shared by many requests may come
        once with its count).
        """
        if counts is None:
            self._gaps1.add(gaps_s)
        else:
            self._gaps1.add_weighted(gaps_s, counts)

    def _reason(self, reason: str) -> None:
        key = (
            reason
            if reason in self._failure_reasons or len(self._failure_reasons) < MAX_REASONS
            else "other"
        )
        self._failure_reasons[key] += 1

    def _add_completed(self, rec: RequestRecord) -> None:
        self.completed += 1
        self._finish_reasons[rec.finish_reason or "unknown"] += 1
        self._sources[rec.token_count_source] += 1
        self._input_tokens += rec.prompt_tokens
        self._output_tokens += rec.output_tokens
        if rec.cached_prompt_tokens is not None:
            c = self._cache
            c[0] += 1
            c[1] += rec.prompt_tokens
            c[2] += rec.cached_prompt_tokens
            c[3] += rec.cached_prompt_tokens > 0
        ttft, tpot, e2e = rec.ttft_s, rec.tpot_s, rec.e2e_s
        self._cols["ttft"].append(math.nan if ttft is None else ttft)
        self._cols["tpot"].append(math.nan if tpot is None else tpot)
        if self._bounded:  # ``_good`` on one request, without arrays
            lim_ttft, lim_tpot = self.slo_ttft_s, self.slo_tpot_s
            self._num_good += (
                ttft is not None
                and ttft == ttft
                and (lim_ttft is None or ttft <= lim_ttft)
                and (lim_tpot is None or tpot is None or tpot != tpot or tpot <= lim_tpot)
            )
        self._cols["e2e"].append(math.nan if e2e is None else e2e)
        if rec.first_scheduled_s is not None:
            self._cols["queueing"].append(rec.first_scheduled_s - rec.arrival_s)
        if rec.first_answer_s is not None:
            self._cols["ttfa"].append(rec.first_answer_s - rec.arrival_s)
        self._add_itl(rec)

    def _add_itl(self, rec: RequestRecord) -> None:
        n = len(rec.chunk_times_s)
        tokens = rec.chunk_tokens
        self._num_chunks += n
        self._chunk_tokens += n if tokens is None else int(sum(tokens))
        if n < 2:
            return
        t = np.asarray(rec.chunk_times_s, dtype=np.float64)
        gaps = t[1:] - t[:-1]
        if tokens is None:
            self._gaps1.add(gaps)
            return
        self._gaps_k.add(gaps)
        # A chunk of k tokens spreads its gap over k: k values of gap/k. Extra tokens of the
        # first chunk have no preceding gap and give no ITL value.
        k = np.asarray(tokens[1:], dtype=np.int64)
        keep = k > 0
        self._itl_k.add(gaps[keep] / k[keep], k[keep])

    @staticmethod
    def _good(
        ttft: np.ndarray, tpot: np.ndarray, slo_ttft_s: float | None, slo_tpot_s: float | None
    ) -> np.ndarray:
        good = ~np.isnan(ttft)  # a request with no token never meets an SLO
        if slo_ttft_s is not None:
            good &= ttft <= slo_ttft_s
        if slo_tpot_s is not None:  # TPOT undefined (one token) counts as met, as in vLLM
            good &= np.isnan(tpot) | (tpot <= slo_tpot_s)
        return good

    def count_good(self, slo_ttft_s: float | None, slo_tpot_s: float | None) -> int:
        """Completed requests meeting both limits (either may be None = no limit)."""
        if self._bounded:
            if (slo_ttft_s, slo_tpot_s) != (self.slo_ttft_s, self.slo_tpot_s):
                raise ValueError(
                    "an accumulator with column_cap counts goodput for its own SLOs only "
                    f"(slo_ttft_s={self.slo_ttft_s}, slo_tpot_s={self.slo_tpot_s})"
                )
            return self._num_good
        ttft, tpot = self._cols["ttft"].values(), self._cols["tpot"].values()
        return int(self._good(ttft, tpot, slo_ttft_s, slo_tpot_s).sum())

    def column(self, name: str) -> np.ndarray:
        """A copy of one per-request column: ttft, tpot, e2e, queueing, send_lag, ttfa (s)."""
        return self._cols[name].values().copy()

    def itl_values(self) -> np.ndarray:
        """Exact per-token ITL values (for plots); raises once folded into the histogram."""
        return self._gaps1.merged(self._itl_k).values()

    def summary(self, duration_s: float | None = None) -> Summary:
        """The summary so far; ``duration_s`` overrides the window (first arrival to last end)."""
        if duration_s is None:
            duration_s = self._end_s - self._start_s if self._end_s >= self._start_s else 0.0
        qs = self.percentiles
        dist = {k: c.distribution(qs) for k, c in self._cols.items()}
        return Summary(
            completed=self.completed,
            failed=self.failed,
            rejected=self.rejected,
            failure_reasons=dict(self._failure_reasons),
            finish_reasons=dict(self._finish_reasons),
            duration_s=float(duration_s),
            total_input_tokens=self._input_tokens,
            total_output_tokens=self._output_tokens,
            ttft=dist["ttft"],
            tpot=dist["tpot"],
            itl=Distribution.of_sample(self._gaps1.merged(self._itl_k), qs),
            itl_chunk=Distribution.of_sample(self._gaps1.merged(self._gaps_k), qs),
            e2e=dist["e2e"],
            queueing=dist["queueing"],
            send_lag=dist["send_lag"],
            time_to_first_answer=dist["ttfa"],
            tokens_per_chunk=self._chunk_tokens / self._num_chunks
            if self._num_chunks
            else math.nan,
            token_count_sources=dict(self._sources),
            slo_ttft_s=self.slo_ttft_s,
            slo_tpot_s=self.slo_tpot_s,
            num_good=self.count_good(self.slo_ttft_s, self.slo_tpot_s),
            percentiles=qs,
            cache_known=self._cache[0],
            cache_known_input_tokens=self._cache[1],
            cached_prompt_tokens=self._cache[2],
            prefix_hit_requests=self._cache[3],
        )


def summarize(
    records: Iterable[RequestRecord], duration_s: float | None = None, **kwargs
) -> Summary:
    """Summarize records in one call; ``kwargs`` go to :class:`MetricsAccumulator`."""
    acc = MetricsAccumulator(**kwargs)
    for rec in records:
        acc.add(rec)
    return acc.summary(duration_s)
