"""The validated configuration of one ``infercast simulate`` run (TOML/YAML file + flags).

File layout (every key optional; flags override the file)::

    model = "llama-3.1-8b"        # preset name or config.json path
    hardware = "h100-sxm"         # preset name or hardware TOML/JSON
    weights = "checkpoint"        # as the model ships (default), or bf16, fp8 ...; kv_cache = "fp8"
    # compute = "fp32"            # matmul dtype (default: the --profile file's, else the weights')
    # experts = "mxfp4/bf16"      # routed experts' own precision (default: the checkpoint's)
    tp = 1
    # ep = 8 ; attn_dp = true     # expert parallel / attention data parallel inside a replica
    replicas = 1
    router = "round-robin"        # round-robin | least-tokens | prefix-affinity
    seed = 0
    mode = "fast"                 # fast | exact (one event per step, the reference)
    slo_ttft_s = 0.5              # goodput limits (optional)
    slo_tpot_s = 0.05

    [scheduler]
    policy = "chunked"            # static | continuous | chunked | prefill-first
    max_num_seqs = 256
    max_num_batched_tokens = 8192
    block_size = 16
    # num_blocks = 20000          # default: the cost model's KV capacity / block_size
    prefix_caching = false
    # adp_ranks = 8               # TensorRT-LLM attention-DP balance over 8 ranks (1 = off),
    # adp_timeout_iters = 60      # with its timeout and batching wait (sched/admission.py)
    # adp_batching_wait_iters = 0

    [workload]
    arrival = "poisson"           # poisson | gamma | closed | offline | trace
    rate = 4.0                    # requests/s (poisson, gamma)
    cv = 1.0                      # gamma burstiness
    # concurrency = 64            # closed loop (instead of a rate)
    num_requests = 1000
    trace = "azure-conv"          # shipped name or CSV/JSONL path
    prefix_groups = 0
    prefix_tokens = 0
    # conversations = "builtin"   # multi-turn: builtin | synthetic | CSV (sim/conversations.py);
    # turns = 4                   # num_requests then counts sessions, rate is sessions/s,
    # think_time_s = 30.0         # input/output are each message's and answer's length
    [workload.input]              # dist: fixed | uniform | normal | lognormal | trace
    dist = "fixed"
    mean = 1024
    std = 0
    [workload.output]
    dist = "fixed"
    mean = 256

    [speculative]                 # optional: speculative decoding (runs are always exact)
    method = "eagle"              # eagle | mtp (a head of draft_layers target layers) | draft
    num_speculative_tokens = 3
    acceptance = 0.8              # mean per-token acceptance rate
    acceptance_std = 0.1          # spread across requests (Beta)
    # draft_model = "llama-3.2-1b" # method "draft": the drafter (preset or config.json)

    # [kv_offload]                # optional: host-DRAM KV tier (needs prefix_caching)
    # gib = 256 ; overlap = false # host_link_gbps = 55.6 (default: the part's measured link)
    # [expert_routing]            # optional (MoE): skew = 1.0 (Zipf) or loads = "loads.csv"
    # redundant = 32              # EPLB redundant expert slots over the EP group
    # [lora]                      # optional: rank = 16, targets = "attn", adapters = 8, slots = 8

    # [disaggregation]            # optional, instead of [speculative]: prefill and decode pools
    # transfer_latency_s = 0.001
    # transfer_bandwidth_bytes_per_s = 1e11   # default: 50 GB/s per GPU x min(TP)
    # layer_overlap = false       # stream the KV layer by layer during prefill
    # [disaggregation.prefill]    # each pool: hardware, replicas, tp, max_num_seqs,
    # replicas = 1                # max_num_batched_tokens (default: the top-level ones)
    # [disaggregation.decode]
    # replicas = 1
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infercast.errors import ConfigError
from infercast.specs.engines import AdmissionFields
from infercast.validation import SEED_MAX, read_text

ROUTERS = ("round-robin", "least-tokens", "prefix-affinity")


class _Frozen(BaseModel):
    # Strict (infercast.validation's rules): TOML `true` is not 1, "4" is not 4, numbers are
    # finite, and an empty string is an error rather than "not given".
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        str_min_length=1,
        str_strip_whitespace=True,
    )


class LengthConfig(_Frozen):
    """A token-length distribution given by mean and standard deviation."""

    dist: Literal["fixed", "uniform", "normal", "lognormal", "trace"] | None = None
    mean: float | None = Field(default=None, gt=0)
    std: float = Field(default=0.0, ge=0)
    max: int | None = Field(default=None, ge=1)


class SchedulerSection(_Frozen, AdmissionFields):  # admission: specs.engines
    policy: Literal["static", "continuous", "chunked", "prefill-first"] = "chunked"
    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    block_size: int = Field(default=16, ge=1)
    num_blocks: int | None = Field(default=None, ge=1)
    prefix_caching: bool = False
    max_model_len: int | None = Field(default=None, ge=2)
    # decode steps between the engine's polls for new requests (SGLang --scheduler-recv-interval,
    # default 1 = every step; sim/replica.py, "Request polling")
    recv_interval: int = Field(default=1, ge=1)
    # vLLM's async scheduling (--async-scheduling; default from v0.14): a step's contents are
    # fixed when the step before it starts (sim/replica.py, "Async scheduling")
    async_scheduling: bool = False
    # TensorRT-LLM's attention-DP context balance over this many ranks (1 = off; a recipe's
    # ``attention_dp_config``: enable_balance, timeout_iters, batching_wait_iters;
    # sched/admission.py ``AdpBalance``)
    adp_ranks: int = Field(default=1, ge=1)
    adp_timeout_iters: int = Field(default=1, ge=1)
    adp_batching_wait_iters: int = Field(default=0, ge=0)
    # SGLang's --max-prefill-tokens (0 = no cap; sched/policies.py ``admit_waiting``)
    max_prefill_tokens: int = Field(default=0, ge=0)
    # TensorRT-LLM's batch waiting (0 = off; sched/admission.py ``BatchWait``)
    batch_wait_timeout_iters: int = Field(default=0, ge=0)
    batch_wait_max_tokens_ratio: float = Field(default=0.0, ge=0, le=1)


class WorkloadSection(_Frozen):
    arrival: Literal["poisson", "gamma", "closed", "offline", "trace"] | None = None
    rate: float | None = Field(default=None, gt=0)
    cv: float = Field(default=1.0, gt=0)
    concurrency: int | None = Field(default=None, ge=1)
    num_requests: int = Field(default=1000, ge=1)
    trace: str | None = None
    input: LengthConfig = LengthConfig()
    output: LengthConfig = LengthConfig()
    prefix_groups: int = Field(default=0, ge=0)
    prefix_tokens: int = Field(default=0, ge=0)
    conversations: str | None = None  # builtin | synthetic | CSV path (sim/conversations.py)
    turns: int | None = Field(default=None, ge=1)
    think_time_s: float | None = Field(default=None, ge=0)

    @property
    def resolved_conversations(self) -> str | None:
        """The conversation source: as set, or ``synthetic`` when only turns / think time are."""
        if self.conversations is not None:
            return self.conversations
        return "synthetic" if self.turns is not None or self.think_time_s is not None else None

    def _check_conversations(self) -> None:
        source = self.resolved_conversations
        if source is None:
            return
        if self.resolved_arrival == "trace" or self.trace is not None:
            raise ValueError(
                "conversations replace the trace: drop `trace` (sessions start by "
                "`rate`, `concurrency` or all at once)"
            )
        for name in ("input", "output"):
            spec: LengthConfig = getattr(self, name)
            if spec.dist not in (None, "trace", "fixed") and spec.mean is None:
                raise ValueError(
                    f"conversations: workload.{name}.dist={spec.dist!r} needs a mean "
                    f"(`{name}_tokens`)"
                )
        lengths = self.input.mean is not None and self.output.mean is not None
        if source == "synthetic" and (self.turns is None or not lengths):
            raise ValueError(
                "synthetic conversations need `turns`, `input_tokens` (each message) "
                "and `output_tokens` (each answer); or use `conversations` builtin"
            )

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSection:
        self._check_conversations()
        arrival = self.resolved_arrival
        if arrival in ("poisson", "gamma") and self.rate is None:
            raise ValueError(
                f"arrival {arrival!r} needs a rate (requests/s): set workload.rate / `rate`"
            )
        if arrival == "closed" and self.concurrency is None:
            raise ValueError("arrival 'closed' needs workload.concurrency / `concurrency`")
        if arrival == "trace" and self.trace is None:
            raise ValueError("arrival 'trace' needs workload.trace / `trace`")
        if self.concurrency is not None and arrival != "closed":
            raise ValueError(
                f"concurrency is for closed-loop arrivals, not {arrival!r}: drop one of them"
            )
        if self.rate is not None and arrival in ("closed", "offline", "trace"):
            raise ValueError(
                f"a rate does not apply to {arrival!r} arrivals: drop `rate` or the arrival choice"
            )
        if (self.prefix_groups > 0) != (self.prefix_tokens > 0):
            raise ValueError("prefix_groups and prefix_tokens go together: set both or neither")
        for name in ("input", "output"):
            spec: LengthConfig = getattr(self, name)
            if spec.dist == "trace" and self.trace is None:
                raise ValueError(f"workload.{name}.dist='trace' needs workload.trace / `trace`")
        return self

    @property
    def resolved_arrival(self) -> str:
        """The arrival process, inferred when not set: concurrency > rate > trace > offline."""
        if self.arrival:
            return self.arrival
        if self.concurrency is not None:
            return "closed"
        if self.rate is not None:
            return "poisson"
        return "trace" if self.trace is not None else "offline"


class SpeculativeSection(_Frozen):
    """Speculative decoding (see ``infercast.sim.speculative``)."""

    method: Literal["eagle", "mtp", "draft"] = "eagle"
    num_speculative_tokens: int = Field(default=3, ge=1, le=16)
    acceptance: float = Field(default=0.8, ge=0, le=1)
    acceptance_std: float = Field(default=0.0, ge=0, lt=0.5)
    draft_model: str | None = None
    draft_layers: int = Field(default=1, ge=1)
    verify_tokens: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> SpeculativeSection:
        if self.method == "draft" and self.draft_model is None:
            raise ValueError("method 'draft' needs speculative.draft_model / `draft_model`")
        return self


class PoolSection(_Frozen):
    """One pool of a disaggregated deployment; None = the top-level setting."""

    hardware: str | None = None
    replicas: int = Field(default=1, ge=1)
    tp: int | None = Field(default=None, ge=1)
    ep: int | None = Field(default=None, ge=1)
    attn_dp: bool | None = None
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)


class DisaggSection(_Frozen):
    """Disaggregated prefill/decode (see ``infercast.sim.disagg``)."""

    prefill: PoolSection = PoolSection()
    decode: PoolSection = PoolSection()
    transfer_bandwidth_bytes_per_s: float | None = Field(default=None, gt=0)
    transfer_latency_s: float = Field(default=1e-3, ge=0)
    layer_overlap: bool = False


class KvOffloadSection(_Frozen):
    """A host-DRAM KV tier below HBM (``sched/host_tier.py``, ``cost/kv_tier.py``)."""

    gib: float = Field(gt=0)  # host memory per replica for KV, GiB
    host_link_gbps: float | None = Field(
        default=None, gt=0
    )  # H2D GB/s per GPU; None = the part's measured
    overlap: bool = False  # reload layer by layer under the step's compute (else the step waits)


class ExpertRoutingSection(_Frozen):
    """Skewed MoE routing and EPLB replicas (``cost/expert_routing.py``)."""

    skew: float | None = Field(default=None, ge=0)  # Zipf exponent over experts ranked by load
    loads: str | None = None  # CSV expert,load: a measured per-expert histogram
    redundant: int = Field(default=0, ge=0)  # EPLB redundant expert slots over the EP group

    @model_validator(mode="after")
    def _one(self) -> ExpertRoutingSection:
        if (self.skew is None) == (self.loads is None):
            raise ValueError(
                "expert routing needs exactly one of skew (Zipf exponent) or loads (CSV file)"
            )
        return self


class LoraSection(_Frozen):
    """LoRA adapters served beside the base model (``cost/lora.py``)."""

    rank: int = Field(ge=1)
    targets: str = "attn"  # q,k,v,o,gate,up,down or attn | mlp | all
    adapters: int = Field(default=1, ge=1)  # distinct, equally popular adapters in the workload
    slots: int | None = Field(default=None, ge=1)  # resident on the GPU (vLLM --max-loras)


class SimConfig(_Frozen):
    """One simulation run, validated; see the module docstring for the file layout."""

    model: str = "llama-3.1-8b"
    hardware: str = "h100-sxm"
    weights: str = (
        "checkpoint"  # resolved on validation: the checkpoint's own (specs/checkpoint.py)
    )
    experts: str | None = (
        None  # routed experts' own "<format>/<compute>" (gpt-oss: mxfp4/...), None = weights
    )
    kv_cache: str | None = None
    # the matmuls' dtype; None: the one the ``--profile`` file records (``infercast machine``'s:
    # the CPU engine's fp32, engine/predict.py ENGINE_COMPUTE), else the weights' default
    # (specs/precision.py DEFAULT_COMPUTE).
    compute: str | None = None
    tp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    attn_dp: bool = False  # attention data parallel across the tp GPUs (MoE: experts over ep)
    replicas: int = Field(default=1, ge=1)
    router: Literal["round-robin", "least-tokens", "prefix-affinity"] = "round-robin"
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    mode: Literal["fast", "exact"] = "fast"
    slo_ttft_s: float | None = Field(default=None, gt=0)
    slo_tpot_s: float | None = Field(default=None, gt=0)
    scheduler: SchedulerSection = SchedulerSection()
    workload: WorkloadSection = WorkloadSection()
    speculative: SpeculativeSection | None = None
    disaggregation: DisaggSection | None = None
    kv_offload: KvOffloadSection | None = None
    expert_routing: ExpertRoutingSection | None = None
    lora: LoraSection | None = None

    @model_validator(mode="before")
    @classmethod
    def _checkpoint_precision(cls, data: Any) -> Any:
        """``weights = "checkpoint"`` (the default) becomes the checkpoint's dtype and experts."""
        if not isinstance(data, dict):
            return data
        weights = data.get("weights")
        if weights is None or str(weights).strip().lower() == "checkpoint":
            from infercast.cost.experts import resolve_precision
            from infercast.specs.catalog import load_hardware

            model = str(data.get("model") or cls.model_fields["model"].default)
            hardware = load_hardware(
                str(data.get("hardware") or cls.model_fields["hardware"].default)
            )
            w, e, _ = resolve_precision(model, hardware, "checkpoint", None)
            data = {**data, "weights": w, "experts": data.get("experts", e)}
        return data

    @field_validator("experts")
    @classmethod
    def _experts(cls, v: str | None) -> str | None:
        if v is None or v.strip().lower() == "none":
            return None
        from infercast.cost.experts import ExpertPrecision

        try:
            return ExpertPrecision.parse(v).spec
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _levers(self) -> SimConfig:
        if self.speculative is not None and self.disaggregation is not None:
            raise ValueError(
                "speculative decoding with disaggregation is not modelled: drop one of them"
            )
        if self.kv_offload is not None and not self.scheduler.prefix_caching:
            raise ValueError(
                "kv_offload keeps prefix-cache blocks in host memory: turn on "
                "scheduler.prefix_caching / `prefix_caching`"
            )
        for name in ("lora", "kv_offload"):
            if getattr(self, name) is not None and (
                self.speculative is not None or self.disaggregation is not None
            ):
                raise ValueError(
                    f"{name} with speculative decoding or disaggregation is not modelled: drop one"
                )
        pools = [("", self.tp, self.ep)]
        if self.disaggregation is not None:
            for name in ("prefill", "decode"):
                pool = getattr(self.disaggregation, name)
                pools.append((f"disaggregation.{name}.", pool.tp or self.tp, pool.ep or self.ep))
        for where, tp, ep in pools:
            if ep > tp:  # the expert-parallel group lives inside the replica's tp GPUs
                raise ValueError(f"{where}ep {ep} exceeds {where}tp {tp}: use `ep` <= `tp`")
        self._bounded()
        return self

    def _bounded(self) -> None:
        """Sizes that are not the workload: each replica and client costs memory and time
        (a replica holds its scheduler and KV block pool: 1000 replicas for 40 requests
        took 1.5 GB and 14 s) but one that can never receive a request changes nothing."""
        n = self.workload.num_requests
        counts = [("replicas", self.replicas)]
        if self.disaggregation is not None:
            counts += [
                (f"disaggregation.{name}.replicas", getattr(self.disaggregation, name).replicas)
                for name in ("prefill", "decode")
            ]
        for name, count in counts:
            if count > n:
                raise ValueError(
                    f"{name} {count} for {n} requests: at most {n} can ever receive "
                    f"one; use {name.split('.')[-1]} <= {n} or more requests"
                )
        if self.workload.concurrency is not None and self.workload.concurrency > n:
            raise ValueError(
                f"concurrency {self.workload.concurrency} for {n} requests: at "
                f"most {n} can be in flight; use `concurrency` <= {n}"
            )


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if where == "config":  # a rule across fields: the message names them
        return f"config: {msg}"
    shown = "" if isinstance(value, dict) else f" (got {value!r})"
    return f"config field {where}: {msg}{shown}"


def build_config(data: dict[str, Any]) -> SimConfig:
    """Validate a nested dict; a bad field raises ConfigError naming it."""
    try:
        return SimConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A TOML (``.toml``) or YAML (``.yaml``/``.yml``) file as a nested dict."""
    if not str(path).strip():
        raise ConfigError("`config` is empty: give a TOML or YAML file")
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    text = read_text(p, "config file")
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                "YAML config needs PyYAML: pip install pyyaml (or use TOML)"
            ) from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"config file {p}: not valid YAML ({str(exc).splitlines()[0]})"
            ) from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {p}: not valid TOML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p}: top level must be a table of keys")
    return data


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``overrides`` (flags; None values skipped) into ``base`` (the file)."""
    out = dict(base)
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, dict):
            out[key] = merge(out.get(key) or {}, value)
        else:
            out[key] = value
    return out
