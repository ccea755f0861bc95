"""A day of traffic: a request rate per minute, and the requests it draws.

Two sources of the rate:

- ``diurnal_rates``: a smooth day,
  ``trough + (peak - trough) * (1 - cos(2 pi (h - peak_hour + 12) / 24)) / 2``
  per minute (one peak at ``peak_hour``, the trough 12 hours away), scaled to a peak rate.
  A stated shape, not data: use a trace for a measured day.
- ``trace_rates``: arrivals of a trace counted per minute (``load_trace``), optionally
  time-stretched (``stretch``: a one-hour trace replayed over a day keeps its shape
  and its total request count divided over the longer span, unless rescaled to a peak).
- ``trace_window``: a window of a long trace at its own time, not stretched (day 3 of the
  Azure 2024 week: ``--trace-window 48:24``); rates and lengths come from that window only.
- ``rate_trace_rates``: a shipped *rate* trace (``RATE_TRACES``: request rates per window of
  a production service, no per-request rows), repeated per minute within each window, for
  its first ``hours`` or a window of it at its own time. ServeGen's 14 days of three
  language models on Alibaba Cloud Model Studio ship (``data/traces/README.md``);
  lengths then come from ``--lengths`` (default azure-conv) or fixed values.

Requests are a non-homogeneous Poisson process at the per-minute rate (each minute's
count Poisson, arrival times uniform within the minute; Lewis & Shedler 1979 for
piecewise-constant rates), lengths drawn from a trace's (prompt, output) pairs or
fixed. Everything is generated in chunks from a seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from infercast.errors import ConfigError
from infercast.sim.workload import Trace, load_trace

MINUTE_S = 60.0
# shipped rate traces: name -> (file in data/traces, column of requests/s per window)
RATE_TRACES = {
    f"servegen-{m}": ("servegen-language-rates.csv", f"{m.replace('-', '_')}_rps")
    for m in ("m-large", "m-mid", "m-small")
}


@dataclass(frozen=True)
class DayLoad:
    """Requests/s for each minute of the day, and where the lengths come from."""

    rates_per_s: np.ndarray  # one per minute
    source: str  # how the rates were made (for reports)
    lengths: Trace | None  # (prompt, output) pairs drawn per request; None = fixed lengths
    input_tokens: int = 1024
    output_tokens: int = 256

    @property
    def minutes(self) -> int:
        return int(self.rates_per_s.size)

    @property
    def duration_s(self) -> float:
        return self.minutes * MINUTE_S

    @property
    def expected_requests(self) -> float:
        return float(self.rates_per_s.sum() * MINUTE_S)


def diurnal_rates(
    peak_rate: float, hours: float = 24.0, trough_fraction: float = 0.2, peak_hour: float = 14.0
) -> np.ndarray:
    """Per-minute rates of a one-peak day (module docstring)."""
    if not (peak_rate > 0 and math.isfinite(peak_rate)):
        raise ConfigError(f"`peak_rate` must be a positive number of requests/s, got {peak_rate}")
    if not 0 <= trough_fraction <= 1:
        raise ConfigError(f"`trough_fraction` must be in [0, 1], got {trough_fraction}")
    if not 0 < hours <= 24 * 14:
        raise ConfigError(f"`hours` must be in (0, 336], got {hours}")
    h = (np.arange(max(1, round(hours * 60))) + 0.5) / 60.0
    shape = (1 - np.cos(2 * np.pi * (h - peak_hour + 12.0) / 24.0)) / 2.0
    return peak_rate * (trough_fraction + (1 - trough_fraction) * shape)


def trace_rates(
    trace: Trace, hours: float | None = None, peak_rate: float | None = None
) -> np.ndarray:
    """Per-minute arrival rates of a trace, stretched to ``hours`` and scaled to ``peak_rate``."""
    if len(trace) == 0:
        raise ConfigError(f"trace {trace.name!r} has no requests")
    span = float(trace.arrival_s[-1] - trace.arrival_s[0]) or MINUTE_S
    minutes = max(1, math.ceil(span / MINUTE_S))
    counts = np.bincount(
        np.minimum(
            ((trace.arrival_s - trace.arrival_s[0]) // MINUTE_S).astype(np.int64), minutes - 1
        ),
        minlength=minutes,
    ).astype(np.float64)
    rates = counts / MINUTE_S
    if hours is not None:
        target = max(1, round(hours * 60))
        if target != minutes:  # stretch (or squeeze) the shape onto the target minutes
            x = (np.arange(target) + 0.5) / target * minutes
            rates = np.interp(x, np.arange(minutes) + 0.5, rates) * minutes / target
    return _scaled(rates, peak_rate)


def parse_window(text: str) -> tuple[float, float]:
    """``START_H:HOURS`` (e.g. ``48:24``) as (start hour, hours), checked."""
    parts = text.split(":")
    try:
        start, hours = (float(x) for x in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        start = hours = None
    if start is None or hours is None or not (start >= 0 and 0 < hours <= 24 * 14):
        raise ConfigError(
            f"`trace_window` {text!r}: give START_H:HOURS with START_H >= 0 and "
            "0 < HOURS <= 336, e.g. 48:24 for the third day"
        )
    return start, hours


def trace_window(trace: Trace, start_h: float, hours: float) -> Trace:
    """Requests ``[start_h, start_h + hours)`` hours into the trace, timed from the window start."""
    span_h = float(trace.arrival_s[-1]) / 3600 if len(trace) else 0.0
    flag = f"`trace_window` {start_h:g}:{hours:g}"
    if start_h + hours > span_h + 1 / 60:  # a minute of slack: the last arrival is not the end
        raise ConfigError(
            f"{flag}: trace {trace.name!r} spans only {span_h:.2f} h; choose a window inside it"
        )
    lo, hi = np.searchsorted(trace.arrival_s, [start_h * 3600, (start_h + hours) * 3600])
    if hi <= lo:
        raise ConfigError(f"{flag}: trace {trace.name!r} has no request in it")
    t0 = start_h * 3600
    return Trace(
        f"{trace.name}[{start_h:g} h +{hours:g} h]",
        trace.arrival_s[lo:hi] - t0,
        trace.prompt_tokens[lo:hi],
        trace.output_tokens[lo:hi],
    )


def _window_rates(trace: Trace, hours: float, peak_rate: float | None) -> np.ndarray:
    """Per-minute rates of a window at its own time (its first minute starts at 0 s)."""
    minutes = max(1, round(hours * 60))
    counts = np.bincount(
        np.minimum((trace.arrival_s // MINUTE_S).astype(np.int64), minutes - 1), minlength=minutes
    ).astype(np.float64)
    return _scaled(counts / MINUTE_S, peak_rate)


def _scaled(rates: np.ndarray, peak_rate: float | None) -> np.ndarray:
    if peak_rate is None:
        return rates
    if not (peak_rate > 0 and math.isfinite(peak_rate)):
        raise ConfigError(f"`peak_rate` must be a positive number of requests/s, got {peak_rate}")
    top = rates.max()
    return rates * (peak_rate / top) if top > 0 else rates


def rate_trace_rates(
    name: str, start_h: float, hours: float, peak_rate: float | None
) -> np.ndarray:
    """Per-minute rates of ``hours`` of a shipped rate trace from ``start_h``, at its own time."""
    import csv

    from infercast.specs.catalog import data_path

    fname, column = RATE_TRACES[name]
    rows = list(csv.DictReader(data_path("traces", fname).read_text().splitlines()))
    t = np.array([float(r["t_s"]) for r in rows])
    rate = np.array([float(r[column]) for r in rows])
    window_s = float(t[1] - t[0])
    span_h = (t[-1] + window_s) / 3600
    if start_h + hours > span_h + 1e-9:
        flag = f"`trace_window` {start_h:g}:{hours:g}"
        raise ConfigError(f"{flag}: trace {name!r} spans {span_h:g} h; choose a window inside it")
    minutes = max(1, round(hours * 60))
    at = start_h * 3600 + (np.arange(minutes) + 0.5) * MINUTE_S  # each minute's middle
    return _scaled(rate[np.minimum((at // window_s).astype(np.int64), rate.size - 1)], peak_rate)


def day_load(
    peak_rate: float | None,
    hours: float,
    trace: str | None = None,
    lengths: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    trough_fraction: float = 0.2,
    peak_hour: float = 14.0,
    window: tuple[float, float] | None = None,
) -> DayLoad:
    """The day a command asks for: a trace's own rates (stretched to ``hours``, or a ``window``
    (start hour, hours) of it at its own time), a shipped rate trace, or a diurnal curve;
    request lengths from ``lengths`` (a trace), the request trace (its window), or fixed values."""
    for name, v in (("`input_tokens`", input_tokens), ("`output_tokens`", output_tokens)):
        if v is not None and v < 1:
            raise ConfigError(f"{name} must be >= 1, got {v}")
    rates, src, tr = _rates(peak_rate, hours, trace, trough_fraction, peak_hour, window)
    fixed = input_tokens is not None and output_tokens is not None
    len_trace = (
        None if fixed else (load_trace(lengths) if lengths else tr or load_trace("azure-conv"))
    )
    return DayLoad(rates, src, len_trace, input_tokens or 1024, output_tokens or 256)


Rates = tuple[np.ndarray, str, Trace | None]


def _rates(
    peak_rate: float | None,
    hours: float,
    trace: str | None,
    trough_fraction: float,
    peak_hour: float,
    window: tuple[float, float] | None,
) -> Rates:
    """(per-minute rates, how they were made, the request trace whose lengths they carry)."""
    if trace in RATE_TRACES:  # rates only: its first ``hours`` unless a window is given
        start_h, span = window if window is not None else (0.0, hours)
        scale = f", scaled to a {peak_rate:g} req/s peak" if peak_rate is not None else ""
        src = f"rate trace {trace}, hours {start_h:g}-{start_h + span:g} at its own time{scale}"
        return rate_trace_rates(trace, start_h, span, peak_rate), src, None
    tr = load_trace(trace) if trace else None
    if window is not None:
        if tr is None:
            raise ConfigError("`trace_window` needs `trace` (a trace longer than the window)")
        full_h = float(tr.arrival_s[-1]) / 3600
        tr = trace_window(tr, *window)
        return (
            _window_rates(tr, window[1], peak_rate),
            f"trace {trace} hours {window[0]:g}-{window[0] + window[1]:g} of {full_h:.1f} "
            f"({len(tr):,} requests), at its own time",
            tr,
        )
    if tr is not None:
        span_h = float(tr.arrival_s[-1]) / 3600
        src = f"trace {trace} ({len(tr):,} requests over {span_h:.2f} h) stretched to {hours:g} h"
        return trace_rates(tr, hours, peak_rate), src, tr
    if peak_rate is None:
        raise ConfigError("give `peak_rate` (requests/s at the busiest minute) or `trace`")
    return (
        diurnal_rates(peak_rate, hours, trough_fraction, peak_hour),
        f"diurnal curve: peak {peak_rate:g} req/s at hour {peak_hour:g}, "
        f"trough {trough_fraction:.0%} of peak",
        None,
    )


def request_chunks(
    load: DayLoad, rng: np.random.Generator, max_prompt: int | None = None, chunk_minutes: int = 30
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(arrival_s, prompt_tokens, output_tokens) arrays, in time order, a few minutes at a time."""
    for m0 in range(0, load.minutes, chunk_minutes):
        rates = load.rates_per_s[m0 : m0 + chunk_minutes]
        counts = rng.poisson(rates * MINUTE_S)
        n = int(counts.sum())
        if n == 0:
            continue
        starts = np.repeat((m0 + np.arange(rates.size)) * MINUTE_S, counts)
        arrivals = np.sort(starts + rng.random(n) * MINUTE_S) if n else starts
        # sort within each minute only: minutes are already in order, so a global sort is the same
        if load.lengths is not None:
            idx = rng.integers(0, len(load.lengths), n)
            prompts = load.lengths.prompt_tokens[idx].astype(np.int64)
            outputs = np.maximum(load.lengths.output_tokens[idx].astype(np.int64), 1)
        else:
            prompts = np.full(n, load.input_tokens, dtype=np.int64)
            outputs = np.full(n, load.output_tokens, dtype=np.int64)
        prompts = np.maximum(prompts, 1)
        if max_prompt is not None:
            prompts = np.minimum(prompts, max_prompt)
        yield arrivals, prompts, outputs
