"""Physics-floor check of published measurements: no real system may beat the floor.

Every scenario: TTFT >= one prompt's prefill (the row's batch for kernel, single-stream
and static-batch rows), TPOT/ITL >= one batch-1 decode step, static-batch throughput <=
batch x output / (prefill + (O - 1) decode floors), any other output throughput <= the
compute ceiling of its requests (prompt and decode FLOPs at peak, whatever the batch),
single-stream and hardware rates <= their ceilings.

A closed loop at a fixed concurrency (a TTFT row and a TPOT row of one run) is also
checked as a whole (:func:`check_closed_loop`): ``C`` clients each send their next
request when the last one ends, so a client's mean cycle ``TTFT + (O - 1) TPOT``
must hold the engine's work for ``C`` requests (the replica serves one request per
client per cycle, in steady state): every request's prompt FLOPs and ``O - 1``
decode tokens at peak FLOP/s, or at least ``O`` weight reads (a request's own
prefill step and ``O - 1`` decode steps are ``O`` separate steps, each reading the
weights) plus every decode token's KV read at peak bandwidth, whichever is longer.
Per-row floors cannot see this: each metric alone is physical, the pair is not.

For a time metric the floor is a lower bound (measured >= floor); for a rate
metric it is an upper bound (measured <= ceiling). Assumptions are chosen so the
bound stays a bound: the smallest context the row allows, no overheads, and, when
the row does not state a KV dtype, the narrowest plausible one (8-bit for 8-bit
or narrower weights). A violation means a data error or a model error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infercast.cost.step import StepModel, tp_link
from infercast.errors import InfercastError, with_flags
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

TIME_METRICS = (
    "ttft_mean_s",
    "prefill_time_s",
    "decode_step_s",
    "mixed_step_s",
    "e2e_latency_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p99_s",
    "itl_mean_s",
)
CYCLE_METRIC = "closed_loop_cycle_s"  # TTFT + (O - 1) TPOT of one closed-loop run
RATE_METRICS = (
    "tokens_per_s_single_stream",
    "achieved_bandwidth_bytes_per_s",
    "matmul_flops_per_s",
    "link_bandwidth_bytes_per_s",
    "output_throughput_per_gpu",
    "output_throughput_total",
)


@dataclass(frozen=True)
class FloorCheck:
    """One row checked against physics: ``bound`` is a floor (times) or a ceiling (rates)."""

    id: str
    metric: str
    measured: float
    bound: float | None
    kind: str  # "floor" | "ceiling"
    skipped_reason: str | None = None
    rows: tuple[
        str, ...
    ] = ()  # the rows the check covers (a closed-loop run: its TTFT and TPOT rows)

    @property
    def violates(self) -> bool:
        if self.bound is None:
            return False
        return self.measured < self.bound if self.kind == "floor" else self.measured > self.bound

    @property
    def ratio(self) -> float | None:
        """measured / bound (>= 1 is physical for floors, <= 1 for ceilings)."""
        return None if self.bound in (None, 0) else self.measured / self.bound


def _int(row: Mapping[str, str], key: str, default: int) -> int:
    value = (row.get(key) or "").strip()
    return int(float(value)) if value else default


def _step_model(row: Mapping[str, str]) -> StepModel:
    weights = row.get("weights") or ""
    if not weights:
        raise InfercastError("the source does not state the weight precision")
    narrow = weights in ("fp8", "int8", "int4", "fp4")
    kv = row.get("kv_cache") or ("fp8" if narrow else weights)
    tp = _int(row, "tp", _int(row, "n_gpus", 1))
    par = Parallelism(tp=tp, pp=_int(row, "pp", 1))
    hw = tp_link(
        load_hardware(row["hardware"]), par.gpus_per_replica
    )  # PCIe-only parts: NCCL over PCIe
    # the ideal even split over the stated GPUs (whole_heads=False): a lower bound for any layout
    return StepModel(
        load_model(row["model"]), hw, Precision.parse(weights, kv), par, whole_heads=False
    )


def _hardware_bound(row: Mapping[str, str]) -> float:
    hw = load_hardware(row["hardware"])
    metric = row["metric"]
    if metric == "matmul_flops_per_s":
        peak = hw.peak_flops(row.get("weights") or "bf16")
        if peak is None:
            raise InfercastError(f"{hw.key} has no {row.get('weights')} peak in the table")
        return peak
    if metric == "link_bandwidth_bytes_per_s":
        # bidirectional tests may use both directions; host copies use PCIe
        return max(2 * hw.link_bandwidth_bytes_per_s, hw.pcie_bandwidth_bytes_per_s * 2) or float(
            "inf"
        )
    return hw.memory_bandwidth_bytes_per_s * _int(row, "n_gpus", 1)


def check_row(row: Mapping[str, str]) -> FloorCheck:
    """Floor (or ceiling) of one measurement row; skipped rows carry the reason."""
    metric, rid = row["metric"], row["id"]
    measured = float(row["value"])
    kind = "floor" if metric in TIME_METRICS else "ceiling"
    if metric not in TIME_METRICS + RATE_METRICS:
        return FloorCheck(
            rid, metric, measured, None, kind, f"metric {metric} has no physics bound here"
        )
    try:
        if metric in (
            "achieved_bandwidth_bytes_per_s",
            "matmul_flops_per_s",
            "link_bandwidth_bytes_per_s",
        ):
            return FloorCheck(rid, metric, measured, _hardware_bound(row), kind)
        static = (
            row.get("scenario") == "static_batch" and row.get("batch") and row.get("output_tokens")
        )
        if metric.startswith("output_throughput") and not static:
            return FloorCheck(rid, metric, measured, _compute_ceiling(row), kind)
        sm = _step_model(row)
        batch = _int(row, "batch", 1)
        prompt = _int(row, "input_tokens", 1)
        prefill = sm.prefill_cost(prompt, batch).floor_time_s
        decode = sm.decode_cost(batch, prompt + 1).floor_time_s
        if metric.startswith(
            "output_throughput"
        ):  # static batch: batch x O tokens in prefill + (O-1) decodes
            out = _int(row, "output_tokens", 1)
            per = _int(row, "n_gpus", 1) if metric.endswith("per_gpu") else 1
            gpus_per_replica = sm.parallel.gpus_per_replica
            replicas = max(_int(row, "n_gpus", gpus_per_replica) // gpus_per_replica, 1)
            return FloorCheck(
                rid,
                metric,
                measured,
                batch * out / (prefill + (out - 1) * decode) * replicas / per,
                kind,
            )
        # ttft/tpot/itl of any scenario: one prompt's prefill, one batch-1 decode step (more
        # sequences in a step only add work), at the smallest context the row allows
        one = sm.decode_cost(1, prompt + 1).floor_time_s
        bound = {
            "ttft_mean_s": prefill,
            "prefill_time_s": prefill,
            "decode_step_s": decode,
            "mixed_step_s": decode,  # the step holds this decode batch and a prompt chunk more
            "e2e_latency_s": prefill + max(_int(row, "output_tokens", 1) - 1, 0) * decode,
            "tokens_per_s_single_stream": 1.0 / one,
            "ttft_p99_s": sm.prefill_cost(prompt, 1).floor_time_s,
            "tpot_mean_s": one,
            "tpot_p99_s": one,
            "itl_mean_s": one,
        }[metric]
        if metric == "ttft_mean_s" and row.get("scenario") not in (
            "kernel",
            "single_stream",
            "static_batch",
        ):
            bound = sm.prefill_cost(prompt, 1).floor_time_s
    except (InfercastError, KeyError, ValueError) as exc:
        why = with_flags(str(exc), {}) or type(exc).__name__
        return FloorCheck(rid, metric, measured, None, kind, why)
    return FloorCheck(rid, metric, measured, bound, kind)


def _compute_ceiling(row: Mapping[str, str]) -> float:
    """Output tokens/s no engine can beat at the row's lengths, whatever its batch: every request
    costs its prompt's FLOPs and O - 1 decode tokens' FLOPs at peak (module docstring). Weight and
    KV reads are left out on purpose: large batches amortize the weights, and speculative
    decoding reads the KV once for several tokens, but no method skips a token's FLOPs."""
    prompt, out = _int(row, "input_tokens", 0), _int(row, "output_tokens", 0)
    if prompt < 1 or out < 1:
        raise InfercastError("a throughput ceiling needs input_tokens and output_tokens")
    if _int(row, "pp", 1) > 1:
        raise InfercastError("pipeline-parallel throughput is not bounded here")
    sm = _step_model(row)
    if sm.machine.compute_dtype == "fp32" and sm.precision.weights != "fp32":
        raise InfercastError(
            f"{sm.hardware.key} has no 16-bit or narrower tensor peak in the table"
        )
    work = _request_work(sm, prompt, out)
    per_request_s = (
        work.prefill_compute_s + (out - 1) * work.decode_compute_s
    )  # every GPU of the replica at once
    gpus = sm.parallel.gpus_per_replica
    replicas = max(_int(row, "n_gpus", gpus) // gpus, 1)
    per = _int(row, "n_gpus", gpus) if row["metric"].endswith("per_gpu") else 1
    return out / per_request_s * replicas / per


def check_closed_loop(ttft_row: Mapping[str, str], tpot_row: Mapping[str, str]) -> FloorCheck:
    """The cycle ``TTFT + (O - 1) TPOT`` of a fixed-concurrency run against the work of its
    ``C`` requests (module docstring). Reported under the TPOT row's id."""
    rid, pair = tpot_row["id"], (ttft_row["id"], tpot_row["id"])
    out = _int(tpot_row, "output_tokens", 0)
    measured = float(ttft_row["value"]) + max(out - 1, 0) * float(tpot_row["value"])
    try:
        tp, pp, ep, dp = (_int(tpot_row, k, 1) for k in ("tp", "pp", "ep", "dp"))
        if pp > 1 or dp > 1 or ep > tp:
            raise InfercastError("pipeline, attention-DP and wide-EP layouts are not bounded here")
        prompt, clients = _int(tpot_row, "input_tokens", 0), _int(tpot_row, "concurrency", 0)
        if out < 1 or prompt < 1 or clients < 1:
            raise InfercastError("a closed loop needs input_tokens, output_tokens and concurrency")
        sm = _step_model(tpot_row)
        per_replica = clients / max(_int(tpot_row, "n_gpus", tp) // tp, 1)
        bound = _cycle_floor(sm, prompt, out, per_replica)
    except (InfercastError, KeyError, ValueError) as exc:
        return FloorCheck(
            rid,
            CYCLE_METRIC,
            measured,
            None,
            "floor",
            with_flags(str(exc), {}) or type(exc).__name__,
            pair,
        )
    return FloorCheck(rid, CYCLE_METRIC, measured, bound, "floor", rows=pair)


def _cycle_floor(sm: StepModel, prompt: int, out: int, clients: float) -> float:
    """max(compute, memory) of one cycle's work on one GPU of the replica (module docstring)."""
    work = _request_work(sm, prompt, out)
    compute = clients * (work.prefill_compute_s + (out - 1) * work.decode_compute_s)
    memory = out * work.weights_read_s + clients * (out - 1) * work.decode_kv_read_s
    return max(compute, memory)


@dataclass(frozen=True)
class _RequestWork:
    """One request's work on one GPU of the replica, at peak (seconds)."""

    prefill_compute_s: float  # the prompt's FLOPs
    decode_compute_s: float  # a decode token's FLOPs, mean over the request
    decode_kv_read_s: float  # a decode token's KV read, mean over the request
    weights_read_s: float  # one read of the weights (a batch-1 step at one token of context)


def _request_work(sm: StepModel, prompt: int, out: int) -> _RequestWork:
    """A decode token's FLOPs and KV read grow with its context, linearly or (sliding and chunked
    attention) concavely, so the mean of the first and last decode step bounds their mean from
    below."""
    pre_c, _, _ = sm.resource_floors(sm.prefill_cost(prompt, 1).ops)
    first_c, first_m, _ = sm.resource_floors(sm.decode_cost(1, prompt + 1).ops)
    last_c, last_m, _ = sm.resource_floors(sm.decode_cost(1, prompt + out).ops)
    _, weights_m, _ = sm.resource_floors(sm.decode_cost(1, 1).ops)
    return _RequestWork(
        pre_c, (first_c + last_c) / 2, (first_m + last_m) / 2 - weights_m, weights_m
    )
