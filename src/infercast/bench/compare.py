"""``--compare-sim``: simulate the workload a bench run just measured, and put both side by side.

The simulator (:func:`infercast.sim.run.simulate`) gets the same arrival
process (rate and burstiness, or closed loop at the concurrency, or the same
trace), the same request count and lengths, and the model, hardware and
weight precision the user names. After a run it replays the measured requests
themselves (:func:`replay_file`): each one's prompt and output tokens as the
server counted them, in the order they were sent, and in an open loop the
times they were sent, so a run of a few dozen random-length requests is not
compared with a different draw of lengths and gaps. Both summaries come from
:mod:`infercast.metrics.summary`, so every number means the same thing on both
sides (``docs/metrics.md``).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercast.bench.run import BenchConfig
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import Summary


def sim_config_dict(
    cfg: BenchConfig,
    model: str,
    hardware: str,
    weights: str,
    base: dict[str, Any] | None = None,
    sessions_file: str | None = None,
    requests_file: str | None = None,
) -> dict[str, Any]:
    """The simulator's nested config for the bench run's workload (``base``: a sim config file).

    A multi-turn run is simulated from ``sessions_file``, the measured sessions (each turn's new
    tokens and answer as the server counted them, the same pauses: ``bench.conversations``); a
    single-turn one from ``requests_file`` when given, the measured requests
    (:func:`replay_file`).
    """
    from infercast.sim.config import merge

    flags = {
        "model": model,
        "hardware": hardware,
        "weights": weights,
        "seed": cfg.seed,
        "slo_ttft_s": cfg.slo_ttft_s,
        "slo_tpot_s": cfg.slo_tpot_s,
        "workload": _sessions_workload(cfg, sessions_file)
        if cfg.multi_turn
        else _requests_workload(cfg)
        if requests_file is None
        else _replay_workload(cfg, requests_file),
    }
    return merge(base or {}, flags)


def replay_file(records: Sequence[RequestRecord], path: str) -> None:
    """Write the measured requests as a trace the simulator reads (``arrival_s, prompt_tokens,
    output_tokens``, in the order they were sent, seconds from the first)."""
    sent = sorted(records, key=lambda r: r.arrival_s)
    t0 = sent[0].arrival_s
    with open(path, "w", encoding="utf-8") as f:
        f.write("arrival_s,prompt_tokens,output_tokens\n")
        for r in sent:
            f.write(f"{r.arrival_s - t0:.6f},{r.prompt_tokens},{r.output_tokens}\n")


def _replay_workload(cfg: BenchConfig, requests_file: str) -> dict[str, Any]:
    """A single-turn run's measured requests (:func:`replay_file`): an open loop at the times
    they were sent, a closed loop (or an offline burst) sending them in order."""
    workload = _requests_workload(cfg)
    with open(requests_file, encoding="utf-8") as f:
        n = sum(1 for _ in f) - 1
    if workload["arrival"] in ("poisson", "gamma"):
        return {"arrival": "trace", "trace": requests_file, "num_requests": n}
    # the trace's rows in order, sent as the closed loop (or the burst) frees a slot
    return {
        "arrival": workload["arrival"],
        **({"concurrency": cfg.concurrency} if workload["arrival"] == "closed" else {}),
        "trace": requests_file,
        "num_requests": n,
        "input": {"dist": "trace"},
        "output": {"dist": "trace"},
    }


def _requests_workload(cfg: BenchConfig) -> dict[str, Any]:
    """A single-turn run's workload: its arrivals (rate, closed loop or trace) and lengths."""
    if cfg.is_trace and cfg.request_rate is None:
        workload: dict[str, Any] = {"arrival": "trace", "trace": cfg.dataset}
    elif cfg.request_rate is not None and cfg.concurrency is None:
        if math.isinf(cfg.request_rate):
            workload = {"arrival": "offline"}
        else:  # gamma shape k has gap CV 1/sqrt(k); the simulator takes the CV
            arrival = "poisson" if cfg.burstiness == 1.0 else "gamma"
            workload = {
                "arrival": arrival,
                "rate": cfg.request_rate,
                "cv": 1 / math.sqrt(cfg.burstiness),
            }
    elif cfg.concurrency is not None and cfg.request_rate is None:
        workload = {"arrival": "closed", "concurrency": cfg.concurrency}
    else:
        raise ConfigError(
            "`compare_sim` supports `request_rate` or `concurrency`, not both together"
        )
    workload["num_requests"] = cfg.num_requests
    if not (cfg.is_trace and cfg.request_rate is None) and cfg.dataset is None:
        # uniform on [m(1-r), m(1+r)] has std m r / sqrt(3)
        for name, mean in (
            ("input", cfg.input_tokens + cfg.shared_prefix_tokens),
            ("output", cfg.output_tokens),
        ):
            r = cfg.range_ratio
            workload[name] = (
                {"dist": "uniform", "mean": mean, "std": mean * r / math.sqrt(3)}
                if r
                else {"dist": "fixed", "mean": mean}
            )
    elif cfg.dataset is not None and not cfg.is_trace:
        raise ConfigError("`compare_sim` works with random prompts and traces, not ShareGPT files")
    return workload


def _sessions_workload(cfg: BenchConfig, sessions_file: str | None) -> dict[str, Any]:
    if cfg.concurrency is not None:
        wl: dict[str, Any] = {"arrival": "closed", "concurrency": cfg.concurrency}
    elif math.isinf(cfg.request_rate):
        wl = {"arrival": "offline"}
    else:
        wl = {
            "arrival": "poisson" if cfg.burstiness == 1.0 else "gamma",
            "rate": cfg.request_rate,
            "cv": 1 / math.sqrt(cfg.burstiness),
        }
    wl["num_requests"] = cfg.num_requests
    if sessions_file is not None:  # the measured sessions, replayed in order with their pauses
        return {**wl, "conversations": sessions_file}
    # before the run (inputs checked): the requested sessions
    src = cfg.conversations or "synthetic"
    wl.update(conversations=src, turns=cfg.turns, think_time_s=cfg.think_time_s)
    if src == "synthetic" or cfg.input_tokens_given:
        wl["input"] = {"mean": cfg.input_tokens}
    if src == "synthetic" or cfg.output_tokens_given:
        wl["output"] = {"mean": cfg.output_tokens}
    return wl


@dataclass(frozen=True)
class SimTarget:
    """What ``--compare-sim`` simulates the bench run's workload on.

    ``config_file``: a simulator config file (scheduler etc.); ``profile``: the efficiency profile
    (``cost.profiles.resolve_profile``; None = the shipped one); ``engine``: an engine preset name
    or file (``specs.engines``), under the config file's settings.
    """

    model: str
    hardware: str
    weights: str = "bf16"
    config_file: str | None = None
    profile: str | None = None
    engine: str | None = None

    @property
    def label(self) -> str:
        """``model on hardware, weights, profile P[, engine E]``, for the side-by-side table."""
        engine = f", engine {self.engine}" if self.engine else ""
        return (
            f"{self.model} on {self.hardware}, {self.weights}, "
            f"profile {self.profile or 'shipped'}{engine}"
        )


def _sim_inputs(
    cfg: BenchConfig,
    target: SimTarget,
    sessions_file: str | None = None,
    requests_file: str | None = None,
):
    """The simulator's validated config and cost model for the bench run's workload."""
    from infercast.sim.config import build_config, read_config_file
    from infercast.sim.presets import build_step_model, with_engine, with_profile_compute

    base = read_config_file(target.config_file) if target.config_file else None
    data = sim_config_dict(
        cfg, target.model, target.hardware, target.weights, base, sessions_file, requests_file
    )
    data, preset = with_engine(with_profile_compute(data, target.profile), target.engine)
    sim_cfg = build_config(data)
    return sim_cfg, build_step_model(sim_cfg, target.profile, preset)


def check_sim_inputs(cfg: BenchConfig, target: SimTarget) -> None:
    """Everything ``--compare-sim`` needs, built without simulating: a bad simulator input
    (model, part, precision, config file, trace, profile, engine) fails before the benchmark
    runs."""
    sim_cfg, _ = _sim_inputs(cfg, target)
    if sim_cfg.workload.trace is not None:
        from infercast.sim.workload import load_trace

        load_trace(sim_cfg.workload.trace)


def run_sim(cfg: BenchConfig, target: SimTarget, turns=None, records=None) -> Summary:
    """Simulate the bench run's workload; the simulator's :class:`Summary`.

    ``turns``: a multi-turn run's sent turns (``BenchResult.turns``), replayed by the simulator;
    ``records``: a single-turn run's measured requests, replayed (:func:`replay_file`) unless the
    run came from a trace (the simulator reads the same file) or one failed (then the workload's
    lengths are drawn as the bench drew them). :func:`replays` says which.
    """
    from infercast.sim.run import simulate

    with tempfile.TemporaryDirectory() as tmp:
        if cfg.multi_turn and turns is not None:
            path = str(Path(tmp) / "sessions.csv")
            turns.write_csv(path)
            sim_cfg, step_model = _sim_inputs(cfg, target, path)
            return simulate(sim_cfg, step_model).summary
        path = str(Path(tmp) / "requests.csv")
        if replays(cfg, records):
            replay_file(records, path)
            sim_cfg, step_model = _sim_inputs(cfg, target, requests_file=path)
        else:
            sim_cfg, step_model = _sim_inputs(cfg, target)
        return simulate(sim_cfg, step_model).summary


def replays(cfg: BenchConfig, records: Sequence[RequestRecord] | None) -> bool:
    """Whether :func:`run_sim` replays ``records``: a single-turn run not read from a trace
    whose every request has counts to replay (none failed, every one answered)."""
    return (
        records is not None
        and not cfg.multi_turn
        and not cfg.is_trace
        and bool(records)
        and all(r.ok and r.output_tokens >= 1 and r.prompt_tokens >= 1 for r in records)
    )


def lockstep_note(cfg: BenchConfig) -> str | None:
    """A warning for a closed loop of equal lengths, whose TTFT one run cannot pin down.

    Its requests finish in the same step, and the next ones come back within a millisecond of
    each other: whether an idle server starts its next step on the first of them or on all is a
    race, and the mean TTFT moves with it (16 requests at concurrency 4 on ``serve``, SmolLM2-135M
    on one core: 1.09-1.45 s, docs/history/engine-weight-formats.md). Random lengths stagger the
    finishes.
    """
    lockstep = (
        cfg.concurrency is not None
        and cfg.concurrency > 1
        and not cfg.multi_turn
        and cfg.dataset is None
        and cfg.range_ratio == 0
    )
    if not lockstep:
        return None
    return (
        "closed loop of equal lengths: requests finish together and the next ones race to the "
        "server, so TTFT moves from run to run; --range-ratio 0.5 staggers them"
    )


ROWS = (
    ("TTFT mean (ms)", "ttft", "mean"),
    ("TTFT p50 (ms)", "ttft", "median"),
    ("TTFT p99 (ms)", "ttft", 99.0),
    ("TPOT mean (ms)", "tpot", "mean"),
    ("TPOT p99 (ms)", "tpot", 99.0),
    ("ITL mean (ms)", "itl", "mean"),
    ("E2E mean (ms)", "e2e", "mean"),
)


def _get(s: Summary, metric: str, stat: str | float) -> float:
    dist = getattr(s, metric)
    return dist.percentiles.get(stat, math.nan) if isinstance(stat, float) else getattr(dist, stat)


def comparison(measured: Summary, predicted: Summary) -> list[dict[str, Any]]:
    """Rows of (metric, measured, predicted, predicted/measured) in ms or per second."""
    rows = []
    for label, metric, stat in ROWS:
        rows.append(
            (label, _get(measured, metric, stat) * 1e3, _get(predicted, metric, stat) * 1e3)
        )
    for label, attr in (
        ("prefix hit rate, tokens (%)", "prefix_hit_rate_tokens"),
        ("prefix hit rate, requests (%)", "prefix_hit_rate_requests"),
    ):
        m, p = getattr(measured, attr), getattr(predicted, attr)
        rows.append((label, math.nan if m is None else 100 * m, math.nan if p is None else 100 * p))
    rows.append(("requests/s", measured.request_throughput_rps, predicted.request_throughput_rps))
    rows.append(
        ("output tokens/s", measured.output_throughput_tps, predicted.output_throughput_tps)
    )
    out = []
    for label, m, p in rows:
        ratio = p / m if m and math.isfinite(m) and math.isfinite(p) else None
        out.append(
            {
                "metric": label,
                "measured": m if math.isfinite(m) else None,
                "predicted": p if math.isfinite(p) else None,
                "predicted_over_measured": ratio,
            }
        )
    return out
