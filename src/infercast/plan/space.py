"""What ``infercast plan`` searches: the request (model, traffic, SLO, grids) and one candidate.

A :class:`Candidate` is one serving configuration *per unit*: a unit is one
replica (aggregated) or ``p`` prefill + ``d`` decode replicas (disaggregated),
all on one part at one TP size. The planner chooses how many units to run.
Both classes are frozen and hashable, so an evaluation is a pure function of
``(candidate, request)`` and can be cached and shipped to other processes.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

from infercast.errors import ConfigError
from infercast.validation import check_int, check_number, check_seed, check_str

BASE_SEQS, BASE_CHUNK = 256, 8192


@dataclass(frozen=True)
class PlanRequest:
    """The question: model, workload, SLO, and the grids of each lever."""

    model: str
    hardware: tuple[str, ...]
    rate: float
    slo_ttft_p99_s: float
    slo_tpot_p99_s: float
    trace: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    num_requests: int = 300
    seed: int = 0
    max_gpus: int = 64
    prices: tuple[tuple[str, float], ...] = ()  # (part, $/GPU-hour) overrides
    tps: tuple[int, ...] = (1, 2, 4, 8)
    precisions: tuple[tuple[str, str], ...] = (("bf16", "bf16"), ("fp8", "bf16"), ("fp8", "fp8"))
    batch_caps: tuple[int, ...] = (64, 256)
    chunks: tuple[int, ...] = (2048, 8192)
    speculative: tuple[bool, ...] = (False, True)
    acceptance: float = 0.7
    num_speculative_tokens: int = 3
    disagg_ratios: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (2, 1))
    top_k: int = 3  # stage 2 explores the levers around this many stage-1 leaders
    exhaustive: bool = False
    objective: str = (
        "cost"  # rank configurations meeting the SLO by "cost" ($/hour) or "energy" (J/token)
    )
    profile: str | None = (
        None  # efficiency profile (cost.profiles.resolve_profile): None = the shipped one
    )
    engine: str | None = (
        None  # engine preset (specs.engines.load_engine): policy, block, memory rule, profile group
    )
    # Workload facts every candidate is simulated with: simulate's [expert_routing] and [lora]
    # sections as sorted (section, ((key, value), ...)) pairs (sim/config.py; docs/production.md)
    levers: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.objective not in ("cost", "energy"):
            raise ConfigError(f"`objective` {self.objective!r}: choose cost or energy")
        check_number(self.rate, "`rate`", 0, lo_open=True, fix="give requests/s, e.g. `rate` 4")
        for flag, value in (
            ("`slo_ttft_p99_s`", self.slo_ttft_p99_s),
            ("`slo_tpot_p99_s`", self.slo_tpot_p99_s),
        ):
            check_number(value, flag, 0, lo_open=True, fix="give a positive number of milliseconds")
        check_number(self.acceptance, "`acceptance`", 0, 1, fix="give a rate from 0 to 1")
        check_seed(self.seed, "`seed`")
        for flag, value in (
            ("`input_tokens`", self.input_tokens),
            ("`output_tokens`", self.output_tokens),
        ):
            if value is not None:
                check_int(value, flag, 1, fix="give at least 1 token")
        for flag, grid in (
            ("`tps`", self.tps),
            ("`batch_caps`", self.batch_caps),
            ("`chunks`", self.chunks),
        ):
            for value in grid:
                check_int(value, flag, 1, fix="give positive integers")
        for p, d in self.disagg_ratios:
            if p < 1 or d < 1:
                raise ConfigError(
                    f"`disagg_ratios` {p}:{d}: both pools need at least one "
                    "replica; use e.g. 1:2, or 'none'"
                )
        if not self.precisions:
            raise ConfigError("`precisions` is empty: give weights/KV pairs, e.g. bf16/bf16")
        from infercast.specs.precision import Precision

        for w, kv in self.precisions:
            check_str(w, "`precisions` weights", fix="write pairs like fp8/bf16")
            check_str(kv, "`precisions` KV", fix="write pairs like fp8/bf16")
            # an unknown dtype fails here, not as "no candidate meets the SLO"
            Precision.parse("bf16" if w.lower() == "checkpoint" else w, kv)
        for part, price in self.prices:
            check_str(part, "`prices` part", fix="write part=dollars, e.g. h100-sxm=2.5")
            check_number(price, f"`prices` {part}", 0, fix="give $/GPU-hour, finite and >= 0")
        if not self.hardware:
            raise ConfigError("`hardware` needs at least one part")
        if self.trace is None and (self.input_tokens is None or self.output_tokens is None):
            raise ConfigError("give --trace, or both --input-tokens and --output-tokens")
        if self.num_requests < 10 or self.max_gpus < 1:
            raise ConfigError("`num_requests` must be >= 10 and `max_gpus` >= 1")
        # names that cannot resolve fail here, one line and exit 2, not as "no candidate fits"
        from infercast.specs.catalog import load_hardware, load_model

        check_str(self.model, "`model`", fix="give a preset name or a config.json path")
        load_model(self.model)
        for part in self.hardware:
            load_hardware(part)

    def workload_key(self) -> dict:
        """Everything an evaluation depends on besides the candidate (for cache keys)."""
        d = asdict(self)
        for grid in (
            "hardware",
            "tps",
            "precisions",
            "batch_caps",
            "chunks",
            "speculative",
            "disagg_ratios",
            "top_k",
            "exhaustive",
            "prices",
        ):
            d.pop(grid)
        return d


@dataclass(frozen=True, order=True)
class Candidate:
    """One configuration of a serving unit (see module doc)."""

    hardware: str
    tp: int
    weights: str
    kv_cache: str
    max_num_seqs: int = BASE_SEQS
    max_num_batched_tokens: int = BASE_CHUNK
    speculative: bool = False
    disagg: tuple[int, int] | None = None  # (prefill, decode) replicas per unit
    extra: tuple = field(default=(), compare=False)

    @property
    def replicas_per_unit(self) -> int:
        return sum(self.disagg) if self.disagg else 1

    @property
    def gpus_per_unit(self) -> int:
        return self.replicas_per_unit * self.tp

    @property
    def base(self) -> tuple[str, int, str, str]:
        """The stage-1 coordinates: part, TP and precision."""
        return self.hardware, self.tp, self.weights, self.kv_cache

    def label(self) -> str:
        parts = [
            f"{self.hardware} TP{self.tp} {self.weights}/{self.kv_cache}-KV",
            f"seqs {self.max_num_seqs} chunk {self.max_num_batched_tokens}",
        ]
        if self.speculative:
            parts.append("spec")
        if self.disagg:
            parts.append(f"P:D {self.disagg[0]}:{self.disagg[1]}")
        return ", ".join(parts)


def stage_one(req: PlanRequest) -> list[Candidate]:
    """Part x TP x precision at the base scheduler, aggregated, no speculation."""
    return [
        Candidate(hw, tp, w, kv)
        for hw, tp, (w, kv) in itertools.product(req.hardware, req.tps, req.precisions)
    ]


def levers(req: PlanRequest, base: Candidate) -> list[Candidate]:
    """Stage 2: the scheduler, speculative and disaggregation levers around one base."""
    hw, tp, w, kv = base.base
    out = [
        Candidate(hw, tp, w, kv, seqs, chunk)
        for seqs, chunk in itertools.product(req.batch_caps, req.chunks)
        if chunk >= seqs
    ]
    if True in req.speculative:
        out.append(Candidate(hw, tp, w, kv, speculative=True))
    out += [Candidate(hw, tp, w, kv, disagg=r) for r in req.disagg_ratios]
    return [c for c in out if c != base]


def exhaustive(req: PlanRequest) -> list[Candidate]:
    """Every combination (aggregated x scheduler x speculative, and every P:D ratio)."""
    out = []
    for hw, tp, (w, kv) in itertools.product(req.hardware, req.tps, req.precisions):
        for seqs, chunk in itertools.product(req.batch_caps, req.chunks):
            if chunk < seqs:
                continue
            out += [Candidate(hw, tp, w, kv, seqs, chunk, spec) for spec in req.speculative]
            out += [Candidate(hw, tp, w, kv, seqs, chunk, disagg=r) for r in req.disagg_ratios]
    return out
