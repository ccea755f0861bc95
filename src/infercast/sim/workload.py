"""Workloads: request traces, length distributions and arrival processes, streamed.

Public for reuse (the bench client replays the same traces)::

    from infercast.sim.workload import load_trace
    tr = load_trace("azure-conv")          # or a path to .csv / .jsonl
    tr.arrival_s, tr.prompt_tokens, tr.output_tokens   # numpy arrays, sorted by arrival

Trace files have columns ``arrival_s, prompt_tokens, output_tokens``, Azure's
original ``TIMESTAMP, ContextTokens, GeneratedTokens`` (TIMESTAMP as seconds or
a date-time string; converted to seconds from the first request; the 2023 and
2024 traces) or BurstGPT's ``Timestamp, Request tokens, Response tokens``; ShareGPT JSON
and Mooncake JSONL are read too (:mod:`infercast.sim.trace_formats`). Shipped
traces: ``azure-conv`` and ``azure-code`` (Azure LLM inference trace 2023,
CC-BY 4.0; attribution in ``infercast/data/traces/README.md``).

Requests are generated in vectorized chunks, on demand, so a million-request
run never holds a million pending requests.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infercast.errors import ConfigError, DataError
from infercast.specs.catalog import data_path

TRACE_FILES = {
    "azure-conv": "azure-llm-2023-conv.csv",
    "azure-code": "azure-llm-2023-code.csv",
}
_COLUMNS = (
    ("arrival_s", "prompt_tokens", "output_tokens"),
    ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    ("Timestamp", "Request tokens", "Response tokens"),  # BurstGPT (HPMLL/BurstGPT)
)
CHUNK = 8192


@dataclass(frozen=True)
class Trace:
    """Requests of a trace, sorted by arrival: seconds from the first, token counts."""

    name: str
    arrival_s: np.ndarray  # float64
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.arrival_s.size)


def load_trace(name_or_path: str | Path) -> Trace:
    """A shipped trace by name (``azure-conv``, ``azure-code``) or a CSV/JSONL file."""
    key = str(name_or_path)
    alias = key.removeprefix("azure-llm-2023-")
    if key in TRACE_FILES or f"azure-{alias}" in TRACE_FILES:
        fname = TRACE_FILES.get(key) or TRACE_FILES[f"azure-{alias}"]
        text = data_path("traces", fname).read_text()
        return _parse_csv(key, text.splitlines())
    path = Path(key)
    if not path.is_file():
        raise ConfigError(
            f"trace {key!r}: not a shipped trace ({', '.join(TRACE_FILES)}) nor a file"
        )
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):  # ShareGPT, Mooncake, row objects
        from infercast.sim.trace_formats import json_trace_rows

        return _parse_rows(key, json_trace_rows(key, path.read_text()))
    with path.open(newline="") as fh:
        return _parse_csv(key, fh)


def _parse_csv(name: str, lines) -> Trace:
    """A CSV trace, parsed by column (a dict per row costs ~25 ms on a 20k-row trace)."""
    lines = list(lines)
    header = next(csv.reader(lines[:1]), None)
    cols = None if header is None else next((c for c in _COLUMNS if set(c) <= set(header)), None)
    if header is not None and cols is not None and len(lines) > 1:
        idx = [header.index(c) for c in cols]
        try:  # plain numbers (the shipped traces): numpy's C reader, ~4x faster than csv + float()
            a = np.loadtxt(
                lines[1:], delimiter=",", usecols=idx, dtype=np.float64, ndmin=2, comments=None
            )
        except ValueError:
            a = None  # date-times, quotes or bad rows: the csv module below says which
        if a is not None and len(a):
            return _finish_trace(
                name, a[:, 0].copy(), a[:, 1].astype(np.int64), a[:, 2].astype(np.int64)
            )
    reader = csv.reader(lines)
    next(reader, None)
    rows = [r for r in reader if r]  # csv.DictReader skips blank lines too
    if header is None or not rows:
        raise DataError(f"trace {name}: no rows")
    if cols is None:
        return _parse_rows(
            name, [dict(zip(header, r, strict=False)) for r in rows[:1]]
        )  # its column error
    idx = [header.index(c) for c in cols]
    if any(len(r) <= max(idx) for r in rows):
        raise DataError(f"trace {name}: a row has fewer fields than the header {header}")
    t, p, o = ([r[i] for r in rows] for i in idx)
    try:  # numpy parses decimal strings as float() does (correctly rounded)
        prompt = np.array(p, dtype=np.float64).astype(np.int64)
        output = np.array(o, dtype=np.float64).astype(np.int64)
    except ValueError as exc:
        raise DataError(f"trace {name}: token counts must be integers ({exc})") from None
    return _finish_trace(name, _seconds(t, name), prompt, output)


def _parse_rows(name: str, rows) -> Trace:
    rows = list(rows)
    if not rows:
        raise DataError(f"trace {name}: no rows")
    keys = set(rows[0])
    cols = next((c for c in _COLUMNS if set(c) <= keys), None)
    if cols is None:
        raise DataError(
            f"trace {name}: columns {sorted(keys)}; need arrival_s, prompt_tokens, output_tokens "
            "(or TIMESTAMP, ContextTokens, GeneratedTokens; "
            "or Timestamp, Request tokens, Response tokens)"
        )
    t_col, p_col, o_col = cols
    try:
        prompt = np.array([int(float(r[p_col])) for r in rows], dtype=np.int64)
        output = np.array([int(float(r[o_col])) for r in rows], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"trace {name}: token counts must be integers ({exc})") from None
    return _finish_trace(name, _seconds([r[t_col] for r in rows], name), prompt, output)


def _finish_trace(name: str, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray) -> Trace:
    """Check the token counts; sort by arrival, seconds from the first request."""
    if (prompt < 1).any() or (output < 1).any():
        bad = int(np.flatnonzero((prompt < 1) | (output < 1))[0])
        raise DataError(f"trace {name}: row {bad + 1} has a token count < 1")
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order] - arrival[order[0]]
    return Trace(name, arrival, prompt[order], output[order])


def _seconds(values: list, name: str) -> np.ndarray:
    """Arrival column as float seconds: numbers as-is, date-time strings from the first."""
    try:
        if all(isinstance(v, str) for v in values):  # CSV: numpy parses as float() does, faster
            return np.array(values, dtype=np.float64)
        return np.array([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        pass
    try:
        stamps = np.array([str(v).strip() for v in values], dtype="datetime64[ns]")
    except ValueError as exc:
        raise DataError(
            f"trace {name}: arrival times are neither seconds nor date-times ({exc})"
        ) from None
    return (stamps - stamps.min()).astype(np.int64) / 1e9


# ---- length distributions ---------------------------------------------------------------
def sample_lengths(
    dist: str, mean: float, std: float, lo: int, hi: int | None, rng: np.random.Generator, n: int
) -> np.ndarray:
    """``n`` token counts from a distribution given by its mean and standard deviation.

    uniform: mean +- std*sqrt(3) (a uniform's std is width/sqrt(12));
    lognormal: sigma^2 = ln(1 + std^2/mean^2), mu = ln(mean) - sigma^2/2 (so the
    mean and std are the requested ones). Rounded, then clipped to [lo, hi].
    """
    if dist == "fixed" or std == 0:
        x = np.full(n, mean)
    elif dist == "uniform":
        half = std * math.sqrt(3.0)
        x = rng.uniform(mean - half, mean + half, n)
    elif dist == "normal":
        x = rng.normal(mean, std, n)
    elif dist == "lognormal":
        sigma2 = math.log1p((std / mean) ** 2)
        x = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), n)
    else:
        raise ConfigError(
            f"length distribution {dist!r}: choose fixed, uniform, normal, lognormal or trace"
        )
    out = np.rint(x).astype(np.int64)
    return np.clip(out, lo, hi if hi is not None else np.iinfo(np.int64).max)


# ---- the request stream ------------------------------------------------------------------
@dataclass(frozen=True)
class WorkloadSpec:
    """Everything that shapes the request stream (built from the validated config)."""

    arrival: str  # poisson | gamma | closed | offline | trace
    num_requests: int
    rate: float | None = None  # requests/s (poisson, gamma)
    cv: float = 1.0  # gamma: coefficient of variation of inter-arrival gaps
    input_dist: str = "fixed"  # fixed | uniform | normal | lognormal | trace
    input_mean: float = 1024
    input_std: float = 0.0
    output_dist: str = "fixed"
    output_mean: float = 256
    output_std: float = 0.0
    min_tokens: int = 1
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    prefix_groups: int = 0  # requests share one of this many prefixes (0 = none)
    prefix_tokens: int = 0  # tokens of the shared prefix, added in front of the prompt


def request_stream(
    spec: WorkloadSpec, rng: np.random.Generator, trace: Trace | None = None
) -> Iterator[tuple[float, int, int, int]]:
    """Yield ``(arrival_s, prompt_tokens, output_tokens, prefix_group)`` per request.

    ``arrival_s`` is NaN for closed-loop workloads (the simulator sends the next
    request when one finishes); ``prefix_group`` is -1 without shared prefixes.
    Trace rows are used in order; past the last row they are sampled with
    replacement (seeded), and a replayed trace continues with inter-arrival
    gaps sampled from its own gaps.

    The items come from one ``zip`` per chunk of requests, chained in C: taking the next
    request resumes no Python frame (the chunk generator runs once per chunk).
    """
    return itertools.chain.from_iterable(
        zip(*cols, strict=True) for cols in request_columns(spec, rng, trace)
    )


def request_columns(
    spec: WorkloadSpec, rng: np.random.Generator, trace: Trace | None = None
) -> Iterator[tuple[list[float], list[int], list[int], list[int]]]:
    """:func:`request_stream`'s items as columns (arrivals, prompts, outputs, groups), a chunk of
    ``CHUNK`` requests at a time (the same numbers from the same draws)."""
    needs_trace = spec.arrival == "trace" or "trace" in (spec.input_dist, spec.output_dist)
    if needs_trace and (trace is None or len(trace) == 0):
        raise ConfigError("workload uses a trace but none was given: pass `trace` NAME_OR_FILE")
    last_s = 0.0
    for start in range(0, spec.num_requests, CHUNK):
        n = min(CHUNK, spec.num_requests - start)
        rows = _trace_rows(start, n, len(trace), rng) if needs_trace and trace is not None else None
        arrivals = _arrivals(spec, rng, n, last_s, rows, trace)
        if arrivals.size and not math.isnan(arrivals[-1]):
            last_s = float(arrivals[-1])
        prompt = _lengths(
            spec.input_dist,
            spec.input_mean,
            spec.input_std,
            spec.max_input_tokens,
            spec,
            rng,
            n,
            rows,
            None if trace is None else trace.prompt_tokens,
        )
        output = _lengths(
            spec.output_dist,
            spec.output_mean,
            spec.output_std,
            spec.max_output_tokens,
            spec,
            rng,
            n,
            rows,
            None if trace is None else trace.output_tokens,
        )
        if spec.prefix_groups > 0:
            groups = rng.integers(0, spec.prefix_groups, n)
            prompt = prompt + spec.prefix_tokens
        else:
            groups = np.full(n, -1)
        yield arrivals.tolist(), prompt.tolist(), output.tolist(), groups.tolist()


def _trace_rows(start: int, n: int, num_rows: int, rng: np.random.Generator) -> np.ndarray:
    idx = np.arange(start, start + n)
    beyond = idx >= num_rows
    if beyond.any():
        idx[beyond] = rng.integers(0, num_rows, int(beyond.sum()))
    return idx


def _arrivals(
    spec: WorkloadSpec,
    rng: np.random.Generator,
    n: int,
    last_s: float,
    rows: np.ndarray | None,
    trace: Trace | None,
) -> np.ndarray:
    if spec.arrival == "closed":
        return np.full(n, math.nan)
    if spec.arrival == "offline":
        return np.zeros(n)
    rate = float(spec.rate or 0.0)  # poisson and gamma: WorkloadSpec requires a positive rate
    if spec.arrival == "poisson":
        gaps = rng.exponential(1.0 / rate, n)
    elif spec.arrival == "gamma":  # shape k = 1/cv^2, scale = 1/(rate k): mean 1/rate, CV cv
        shape = 1.0 / spec.cv**2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), n)
    elif spec.arrival == "trace" and trace is not None and rows is not None:  # caller checked
        # Row i's gap to row i-1: in order this replays the trace's own times.
        gaps = np.diff(trace.arrival_s, prepend=trace.arrival_s[0])[rows]
    else:
        raise ConfigError(
            f"arrival process {spec.arrival!r}: choose poisson, gamma, closed, offline or trace"
        )
    out = last_s + np.cumsum(gaps)
    if spec.arrival != "trace" and last_s == 0.0 and out.size:
        out -= out[0]  # the first request arrives at t = 0
    return out


def _lengths(
    dist: str,
    mean: float,
    std: float,
    hi: int | None,
    spec: WorkloadSpec,
    rng: np.random.Generator,
    n: int,
    rows: np.ndarray | None,
    column: np.ndarray | None,
) -> np.ndarray:
    if dist == "trace" and column is not None and rows is not None:  # checked by the caller
        x = column[rows]
        return np.clip(x, spec.min_tokens, hi) if hi is not None else x
    return sample_lengths(dist, mean, std, spec.min_tokens, hi, rng, n)
