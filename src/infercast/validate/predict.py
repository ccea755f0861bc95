"""A predictor per scenario: the workload the source describes, as the row's engine runs it.

``plan_case`` turns a :class:`~infercast.validate.cases.Case` into a :class:`Plan`:
the step shapes to time (on the row's setup, see :mod:`infercast.validate.setup`)
and how their times make the row's metric; or raises :class:`Unpredictable`
with the reason. Scenarios (``docs/validation.md`` says what each assumes):

- ``kernel``: one prefill step of ``batch`` prompts, or one decode step at the mean
  context of the generated tokens (``I + O/2``); hardware rows from the spec
  times the profile's achieved fractions.
- ``single_stream``: batch-1 prefill and decode steps (tok/s, TTFT, E2E, and gpt-fast's
  "bandwidth" = model bytes x tok/s).
- ``static_batch``: one prefill of the whole batch, then ``O - 1`` decode steps.
- ``offline``: the engine runs at its own max batch (the KV that fits at ``I + O``,
  capped by its max running sequences): closed-loop steady state (:mod:`.steady`).
- ``concurrency``: the closed loop at the row's concurrency, the row's benchmark client
  (the simulator, ``validate``'s default; closed form in waves, :mod:`.steady`, with
  ``--fast`` and as the cross-check beside it).
- ``server``: the simulator, Poisson arrivals at ``request_rate`` over the replicas
  (also offline TTFT/ITL rows, every request at t = 0).
- ``disaggregated``: prefill and decode pools from ``extra``, the closed loop by the
  simulator's pools (the default), or in closed form (:mod:`.disagg`, ``--fast``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from infercast.closedform.steady import closed_loop
from infercast.cost.efficiency import EfficiencyProfile
from infercast.errors import InfercastError
from infercast.metrics.summary import Summary
from infercast.specs.catalog import load_hardware
from infercast.validate.cases import Case
from infercast.validate.datasets import dataset_lengths, dataset_requests
from infercast.validate.ledger import Shape, StepModels
from infercast.validate.setup import (
    Layout,
    Unpredictable,
    engine_family,
    group_key,
    is_moe,
    layout,
    length_range_ratio,
    unshardable_tp,
)

Combine = Callable[[Sequence[float], EfficiencyProfile], float]
HARDWARE_METRICS = ("matmul_flops_per_s", "link_bandwidth_bytes_per_s")
NOT_YET: dict[str, str] = {}


@dataclass(frozen=True)
class Plan:
    """How to predict one row: step shapes on a setup, and how their times combine."""

    case: Case
    group: str
    layout: Layout | None
    shapes: tuple[Shape, ...]
    combine: Combine | None  # step times -> value; None when only the simulator predicts the row
    notes: tuple[str, ...] = ()
    simulate: Callable[[EfficiencyProfile], Summary] | None = None  # simulator-based rows:
    sim_key: tuple = ()  # rows of one simulation share it
    sim_combine: Callable[[Summary, EfficiencyProfile], float] | None = None  # Summary -> value
    # the Setup of each shape, when not all on ``layout.setup`` (disaggregated pools)
    setups: tuple = ()


def _need(value, what: str):
    if value is None:
        raise Unpredictable(f"the row does not state {what}")
    return value


def _lengths(case: Case) -> tuple[int, int]:
    """Input/output tokens from the row, else the dataset's mean lengths (used as fixed)."""
    i, o = case.input_tokens, case.output_tokens
    if (i is None or o is None) and case.dataset:
        di, do = dataset_lengths(case.dataset)
        i, o = i if i is not None else di, o if o is not None else do
    if i is None or o is None:
        what = "input_tokens" if i is None else "output_tokens"
        raise Unpredictable(
            f"no {what} in the row, and dataset {case.dataset or '(none)'!r} has no mean length "
            "for it"
        )
    if i < 1 or o < 1:
        raise Unpredictable(f"input_tokens={i} and output_tokens={o} must both be >= 1")
    r = length_range_ratio(case)
    if r is not None:  # lengths drawn from [r L, L]: their mean (setup.length_range_ratio)
        i, o = max(1, round(i * (1 + r) / 2)), max(1, round(o * (1 + r) / 2))
    return int(i), int(o)


def plan_case(case: Case, models: StepModels) -> Plan:
    """The Plan of one row, or :class:`Unpredictable` with the reason."""
    if case.problem:
        raise Unpredictable(case.problem)
    if case.scenario in NOT_YET:
        raise Unpredictable(NOT_YET[case.scenario])
    builder = BUILDERS.get(case.scenario)
    if builder is None:
        raise Unpredictable(f"unknown scenario {case.scenario!r}")
    return builder(case, models)


def _metric_error(case: Case) -> Unpredictable:
    return Unpredictable(f"metric {case.metric} has no {case.scenario} predictor")


def _replica(case: Case, models: StepModels):
    lay = layout(case, models.engine)
    sm = models.get(lay.setup)
    if sm.machine.compute_dtype == "fp32" and lay.setup.weights != "fp32":
        raise Unpredictable(
            f"{case.hardware} has no 16-bit or narrower tensor peak in the hardware table"
        )
    return lay, sm


# ---- kernel and single stream ----------------------------------------------------------
def _hardware(case: Case) -> Plan:
    try:
        hw = load_hardware(case.hardware)
    except InfercastError as exc:
        raise Unpredictable(str(exc)) from None
    if case.metric == "matmul_flops_per_s":
        dtype = case.weights or "bf16"
        peak = hw.peak_flops(dtype)
        if not peak:
            raise Unpredictable(f"{hw.key} has no {dtype} peak in the hardware table")
        shape = re.search(r"(\d+)x\d+x\d+", case.dataset)
        m = float(shape.group(1)) if shape else 4096.0

        def combine(t, p):  # the profile's GEMM efficiency at M rows (EfficiencyProfile.gemm_eff)
            return peak * p.gemm_eff(dtype, m)

        return Plan(case, group_key(case), None, (), combine)
    text = case.dataset.lower()
    if case.metric == "achieved_bandwidth_bytes_per_s":
        bw = hw.memory_bandwidth_bytes_per_s
        return Plan(case, group_key(case), None, (), lambda t, p: bw * p.mem_bw_eff)
    link = (
        hw.pcie_bandwidth_bytes_per_s
        if ("pcie" in text or "host" in text)
        else hw.link_bandwidth_bytes_per_s
    )
    link *= 2 if "bidirectional" in text else 1
    if link <= 0:
        raise Unpredictable(f"{hw.key} has no link bandwidth for this test in the hardware table")
    return Plan(case, group_key(case), None, (), lambda t, p: link * p.comm_bw_eff)


def _kernel(case: Case, models: StepModels) -> Plan:
    if case.metric in HARDWARE_METRICS or (
        case.metric == "achieved_bandwidth_bytes_per_s" and not case.model
    ):
        return _hardware(case)
    lay, _ = _replica(case, models)
    b, i = case.batch or 1, _need(case.input_tokens, "input_tokens")
    if case.metric == "prefill_time_s":
        shape: Shape = ((b, i, 0),)
    elif case.metric == "decode_step_s":
        shape = ((b, 1, i + (case.output_tokens or 0) // 2),)
    elif case.metric == "mixed_step_s":  # chunked prefill: b decodes at context I + a chunk
        chunk = case.extra.get("prefill_chunk_tokens")
        if not isinstance(chunk, int) or chunk < 1:
            raise Unpredictable("a mixed step needs extra.prefill_chunk_tokens (a count >= 1)")
        past = case.extra.get("prefill_past_tokens", 0)
        shape = ((b, 1, i), (1, chunk, past))
    else:
        raise _metric_error(case)
    return Plan(case, group_key(case), lay, (shape,), lambda t, p: t[0], lay.notes)


def _single_stream(case: Case, models: StepModels) -> Plan:
    lay, sm = _replica(case, models)
    i, o = case.input_tokens or 1, case.output_tokens
    decode: Shape = ((1, 1, i + (o or 0) // 2),)
    prefill: Shape = ((1, i, 0),)
    m = case.metric
    if m == "tokens_per_s_single_stream":
        return Plan(case, group_key(case), lay, (decode,), lambda t, p: 1.0 / t[0], lay.notes)
    if m == "achieved_bandwidth_bytes_per_s":  # gpt-fast: model bytes per GPU x tokens/s
        model_bytes = sm.memory.weight_bytes
        return Plan(
            case, group_key(case), lay, (decode,), lambda t, p: model_bytes / t[0], lay.notes
        )
    _need(case.input_tokens, "input_tokens")
    if m == "ttft_mean_s":
        return Plan(case, group_key(case), lay, (prefill,), lambda t, p: t[0], lay.notes)
    if m == "e2e_latency_s":
        n = _need(o, "output_tokens")
        return Plan(
            case,
            group_key(case),
            lay,
            (prefill, decode),
            lambda t, p: t[0] + (n - 1) * t[1],
            lay.notes,
        )
    raise _metric_error(case)


# ---- batched scenarios -----------------------------------------------------------------
def _static_batch(case: Case, models: StepModels) -> Plan:
    lay, sm = _replica(case, models)
    b, i = _need(case.batch, "the batch size"), _need(case.input_tokens, "input_tokens")
    o, reps, n = case.output_tokens, lay.replicas, lay.num_gpus
    notes = lay.notes + (
        ()
        if sm.memory.fits(b, i + (o or 1))
        else (f"batch {b} does not fit in memory by the model's plan",)
    )
    if o is None:  # decode-only test: tokens/s of one decode step at the prompt's context
        if case.metric not in ("output_throughput_per_gpu", "output_throughput_total"):
            raise Unpredictable("the row does not state output_tokens")
        per = n if case.metric.endswith("per_gpu") else 1
        return Plan(
            case, group_key(case), lay, (((b, 1, i),),), lambda t, p: b / t[0] * reps / per, notes
        )
    shapes = (((b, i, 0),), ((b, 1, i + o // 2),))

    def run_s(t):
        return t[0] + (o - 1) * t[1]

    combine = {
        "output_throughput_per_gpu": lambda t, p: b * o / run_s(t) * reps / n,
        "output_throughput_total": lambda t, p: b * o / run_s(t) * reps,
        "ttft_mean_s": lambda t, p: t[0],
        "e2e_latency_s": lambda t, p: run_s(t),
    }.get(case.metric)
    if combine is None:
        raise _metric_error(case)
    return Plan(case, group_key(case), lay, shapes, combine, notes)


def _running_limit(case: Case, lay: Layout, sm, i: int, o: int) -> int:
    """Requests the engine runs at once: its cap, and the KV that fits. TensorRT-LLM's default
    scheduler (GUARANTEED_NO_EVICT) reserves each request's full ``I + O``; vLLM and SGLang admit
    on current use and preempt, so in steady state they hold the mean context ``I + O/2``."""
    full = sm.memory.max_batch(i + o)
    if full <= 0:
        raise Unpredictable(
            f"the weights plus one {i + o}-token sequence do not fit on "
            f"{lay.setup.gpus_per_replica} x {case.hardware}"
        )
    fit = full if engine_family(case.engine) == "trtllm" else sm.memory.max_batch(i + o // 2)
    return min(fit, lay.setup.max_seqs)


def _closed_loop_plan(
    case: Case,
    models: StepModels,
    clients: float | None,
    waves: float | None = None,
    recv: int = 1,
) -> Plan:
    lay, sm = _replica(case, models)
    i, o = _lengths(case)
    if waves is not None:  # a benchmark client's prompts, as the simulator runs them
        i += harness_prompt_tokens(case)
    limit = _running_limit(case, lay, sm, i, o)
    # Pipeline parallel: pp micro-batches in flight, each a full pass through the stages
    # (StepModel times one pass), so a replica is pp closed loops of 1/pp of its requests.
    pp = lay.setup.pp
    per_replica = limit if clients is None else max(1.0, clients / lay.replicas)
    cl = closed_loop(
        max(1.0, per_replica / pp),
        max(1, limit // pp),
        i,
        o,
        lay.setup.max_batched_tokens,
        waves,
        arrival_lag=waves is not None,
    )
    reps, n = lay.replicas, lay.num_gpus
    key = {"ttft_mean_s": "ttft_s", "tpot_mean_s": "tpot_s", "itl_mean_s": "tpot_s"}.get(
        case.metric
    )
    if (
        key == "ttft_s" and waves is not None
    ):  # a benchmark client's TTFT includes the serving stack
        # A server that polls for requests every ``recv`` decode steps (sim/replica.py, "Request
        # polling") keeps a later wave's request (wave one meets an idle engine) waiting (recv -
        # 1) / 2 steps past the step the arrival lag already charges, on average.
        poll = (recv - 1) / 2 * (waves - 1) / waves

        def ttft(t, p):
            m = cl.metrics(t)
            return m[key] + poll * m["tpot_s"] + p.request_overhead_s

        return Plan(case, group_key(case), lay, cl.shapes, ttft, lay.notes)
    if key is not None:
        return Plan(
            case, group_key(case), lay, cl.shapes, lambda t, p: cl.metrics(t)[key], lay.notes
        )
    scale = {
        "output_throughput_total": reps * pp,
        "output_throughput_per_gpu": reps * pp / n,
        "input_throughput_per_gpu": reps * pp / n * i / o,
    }.get(case.metric)
    if scale is None:
        raise _metric_error(case)
    return Plan(
        case,
        group_key(case),
        lay,
        cl.shapes,
        lambda t, p: cl.metrics(t)["output_tokens_per_s"] * scale,
        lay.notes,
    )


def _offline(case: Case, models: StepModels) -> Plan:
    if case.metric in ("ttft_mean_s", "itl_mean_s"):  # all requests at t = 0: the queue matters
        return _server(case, models)
    return _closed_loop_plan(case, models, case.concurrency)


def _concurrency(case: Case, models: StepModels) -> Plan:
    """Closed loop whose clients start together: the closed form in waves (as many as the row's
    harness sends requests per client, :func:`harness_waves`) and the simulator with that client."""
    if case.metric not in ("ttft_mean_s", "tpot_mean_s", "itl_mean_s"):
        raise _metric_error(case)
    clients = _need(case.concurrency, "concurrency")
    closed = _closed_loop_plan(
        case, models, clients, harness_waves(case, clients), recv_interval(case)
    )
    sim = _server(case, models)
    combine = sim.sim_combine
    if (
        case.metric == "ttft_mean_s"
    ):  # the simulator times the engine; the client adds the serving stack

        def combine(summary, p, inner=sim.sim_combine):
            return inner(summary, p) + p.request_overhead_s

    return replace(
        closed, simulate=sim.simulate, sim_key=sim.sim_key, sim_combine=combine, notes=sim.notes
    )


AIC_SOURCE = "aiconfigurator-silicon-sample"  # aiconfigurator's measured rows (data/README.md)


def row_harness(case: Case):
    """The benchmark client a closed-loop row ran (:mod:`infercast.sim.clients`) and the note saying
    how it was chosen: ``extra.harness`` when the row names one; else InferenceX's client for a
    row that states InferenceX's length range; else, for aiconfigurator's fixed-length rows,
    aiconfigurator's own runner (AIPerf with fixed lengths: the rows name no harness, so it is
    assumed and noted); else InferenceX's client with the row's fixed lengths, noted."""
    from infercast.sim.clients import load_harness

    name = case.extra.get("harness")
    if isinstance(name, str) and name:
        try:
            return load_harness(name), None
        except InfercastError as exc:
            raise Unpredictable(str(exc)) from None
    if length_range_ratio(case) is not None:
        return load_harness("inferencex"), None
    if case.source == AIC_SOURCE:
        return (
            load_harness("aiconfigurator-aiperf"),
            "harness not stated: aiconfigurator's AIPerf runner assumed",
        )
    return load_harness("inferencex"), "harness not stated: InferenceX's client assumed"


def recv_interval(case: Case) -> int:
    """Decode steps between the server's polls for new requests the row's run set
    (``extra.scheduler_recv_interval``: SGLang's ``--scheduler-recv-interval``, recorded from the
    run's recipe; 1 = every step, the engines' default)."""
    value = case.extra.get("scheduler_recv_interval", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Unpredictable(
            f"extra.scheduler_recv_interval {value!r}: must be a whole number of steps >= 1"
        )
    return value


def harness_waves(case: Case, clients: int) -> float:
    """Requests per client the row's harness sends (``HarnessPreset.requests_for``): the closed
    form's wave count, so it and the simulator run the same client."""
    harness, _ = row_harness(case)
    c = max(1, round(clients))
    return harness.requests_for(c) / c


def harness_prompt_tokens(case: Case) -> int:
    """Tokens the row's client adds to each prompt: the model's chat template when it sends chat
    requests (:func:`infercast.sim.clients.chat_template_tokens`), else 0; the closed forms add
    them as :func:`harness_workload` does for the simulator."""
    from infercast.sim.clients import chat_template_tokens

    harness, _ = row_harness(case)
    if harness.endpoint != "chat":
        return 0
    return chat_template_tokens(case.model) or 0


def harness_workload(case: Case, clients: int) -> tuple[dict, str | None]:
    """The simulator's closed-loop workload of a row at ``clients`` clients (per replica or per
    disaggregated deployment), as its harness runs it, and the harness note."""
    from infercast.sim.clients import chat_template_tokens, closed_loop_workload

    harness, note = row_harness(case)
    if harness.endpoint == "chat" and chat_template_tokens(case.model) is None:
        note = "; ".join(
            n for n in (note, f"chat template of {case.model} not tabled: stated length run") if n
        )
    i, o = case.input_tokens, case.output_tokens
    if i is None or o is None:  # a dataset's mean lengths, run as fixed ones
        i, o = _lengths(case)
        return closed_loop_workload(harness, clients, i, o, fixed=True, model=case.model), note
    r = length_range_ratio(case)
    return closed_loop_workload(
        harness, clients, int(i), int(o), range_ratio=r, fixed=r is None, model=case.model
    ), note


def _server(case: Case, models: StepModels) -> Plan:
    from infercast.validate.simrun import SIM_METRICS, sim_predictor

    if case.metric not in SIM_METRICS:
        raise _metric_error(case)
    lay, sm = _replica(case, models)
    i, o = _lengths(case)
    _running_limit(case, lay, sm, i, o)
    # One replica: round-robin gives each replica 1/replicas of the load (the split of a
    # Poisson stream by round-robin is a little more regular than Poisson; noted in the docs).
    reps = lay.replicas
    count = max(1, min(dataset_requests(case.dataset) or 500, 1000) // reps)
    fixed = {"input": {"dist": "fixed", "mean": i}, "output": {"dist": "fixed", "mean": o}}
    notes = lay.notes
    recv = 1
    if case.scenario == "concurrency":
        workload, note = harness_workload(case, max(1, round(case.concurrency / reps)))
        notes += (note,) if note else ()
        recv = recv_interval(case)
        if recv > 1:
            notes += (f"server polls for new requests every {recv} decode steps (row's recipe)",)
    elif case.scenario == "server":
        rate = _need(case.request_rate, "request_rate") / reps
        workload = {"num_requests": count, "arrival": "poisson", "rate": rate, **fixed}
    else:
        workload = {"num_requests": count, "arrival": "offline", **fixed}
    key, run = sim_predictor(lay.setup, workload, recv)
    pick = SIM_METRICS[case.metric]
    # the total of every replica; x * 1 is exact in floating point
    scale = reps if case.metric == "output_throughput_total" else 1
    return Plan(
        case,
        group_key(case),
        lay,
        (),
        None,
        notes,
        run,
        key,
        lambda summary, p: float(pick(summary)) * scale,
    )


def _speculative(case: Case, models: StepModels) -> Plan:
    """Speedup at the measured acceptance length (:mod:`infercast.validate.speculative`)."""
    from infercast.cost.speculative import SpeculativeConfig, SpeculativeModel
    from infercast.validate.speculative import drafting

    if case.metric == "acceptance_length":
        raise Unpredictable(
            "acceptance length is a property of the drafter and the data: an input to the cost "
            "model, not an output"
        )
    if case.metric != "speedup":
        raise _metric_error(case)
    tau = case.extra.get("acceptance_length")
    if not isinstance(tau, int | float) or tau < 1:
        raise Unpredictable(
            "a speedup needs the acceptance length (extra.acceptance_length or a paired row)"
        )
    shape = drafting(case.engine)
    if shape is None:
        raise Unpredictable(f"no drafter model for {case.engine!r} (EAGLE-style heads only)")
    k, width = shape
    notes = () if case.weights else ("precision not stated: 16-bit assumed",)
    lay, sm = _replica(replace(case, weights=case.weights or "fp16"), models)
    b = case.batch or 1
    ctx = (case.input_tokens or 256) + (case.output_tokens or 256) // 2
    cfg = SpeculativeConfig("eagle", k, verify_tokens=width)

    def run(profile: EfficiencyProfile):
        from infercast.validate.ledger import setup_hardware

        target = type(sm)(
            sm.model,
            setup_hardware(lay.setup),
            sm.precision,
            sm.parallel,
            profile,
            experts=sm.experts,
        )
        return SpeculativeModel(target, cfg).step(b, ctx)

    key = ("speculative", lay.setup, k, width, b, ctx)
    return Plan(
        case,
        group_key(case),
        lay,
        (),
        None,
        lay.notes + notes,
        run,
        key,
        lambda st, p: st.plain_s * float(tau) / st.step_s,
    )


def _pool(p: dict, where: str, model: str) -> tuple[int, int, bool, str | None]:
    """A disaggregated pool's worker: (GPUs, EP, attention DP, the note of an assumed layout)
    from the row's ``extra``; a TP that cannot shard the heads means attention DP (``setup.py``)."""
    try:
        tp, adp, pp = (int(p.get(k) or 1) for k in ("tp_size", "attention_dp_size", "pp_size"))
        ep = int(p.get("moe_ep_size") or 1)
    except (TypeError, ValueError, AttributeError):
        raise Unpredictable(
            f"extra.{where} does not describe a worker (tp_size, attention_dp_size, moe_ep_size)"
        ) from None
    if pp != 1 or (tp > 1 and adp > 1):
        raise Unpredictable(
            f"the {where} workers mix pipeline or attention TP with attention DP (not modelled)"
        )
    g = tp * adp
    note = unshardable_tp(model, g) if adp == 1 and g > 1 else None
    if note:
        return g, (g if is_moe(model) else min(ep, g)), True, note
    return g, min(ep, g), adp > 1, None


def _disaggregated(case: Case, models: StepModels) -> Plan:
    """Prefill and decode pools from ``extra``, closed loop at the row's concurrency: closed form
    (:mod:`infercast.closedform.disagg`, ``validate --fast``), and the simulator's pools (the
    default)."""
    from infercast.closedform.disagg import (
        decode_running_limit,
        disagg_loop,
        pool_workers,
        prefill_seats,
    )
    from infercast.cost.comm import kv_transfer_time_s
    from infercast.sim.disagg import DEFAULT_LINK_PER_GPU_BYTES_PER_S, kv_transfer_bytes
    from infercast.validate.simrun import SIM_METRICS, disagg_predictor

    if case.metric not in ("ttft_mean_s", "tpot_mean_s", "itl_mean_s"):
        raise _metric_error(case)
    if not isinstance(case.extra.get("prefill"), dict) or not isinstance(
        case.extra.get("decode"), dict
    ):
        raise Unpredictable(
            "a disaggregated row needs extra.prefill and extra.decode worker layouts"
        )
    gp, ep_p, dp_p, note_p = _pool(case.extra["prefill"], "prefill", case.model)
    gd, ep_d, dp_d, note_d = _pool(case.extra["decode"], "decode", case.model)
    pool_notes = tuple(
        f"{side} workers: {n}" for side, n in (("prefill", note_p), ("decode", note_d)) if n
    )
    workers, assumed = pool_workers(
        case.extra["prefill"], case.extra["decode"], case.n_gpus, (gp, gd)
    )
    decode = replace(case, tp=gd, pp=1, ep=ep_d, n_gpus=gd)
    lay, sm = _replica(decode, models)
    setup = replace(lay.setup, attn_dp=dp_d)
    pf_setup = replace(setup, tp=gp, ep=ep_p, attn_dp=dp_p)
    pf_sm, dec_sm = models.get(pf_setup), models.get(setup)
    i, o = _lengths(case)
    i += harness_prompt_tokens(case)  # the client's chat template, as simulated
    clients = _need(case.concurrency, "concurrency")
    # sim/disagg.py's defaults: 50 GB/s per GPU x the smaller TP, 1 ms, no layer overlap
    bw = DEFAULT_LINK_PER_GPU_BYTES_PER_S * min(pf_sm.parallel.tp, dec_sm.parallel.tp)
    xfer = kv_transfer_time_s(kv_transfer_bytes(pf_sm, i), bw, 1e-3)
    limit = _running_limit(case, replace(lay, setup=setup), dec_sm, i, o)
    limit = decode_running_limit(limit, case.extra["decode"], dec_sm.memory.max_batch(i + o))
    ranks_p = gp if dp_p else 1
    seats = prefill_seats(case.extra["prefill"], ranks_p, setup.max_seqs)
    loop = disagg_loop(
        clients,
        workers,
        i,
        o,
        setup.max_batched_tokens,
        seats,
        limit,
        xfer,
        harness_waves(case, clients),
        prefill_ranks=ranks_p,
    )
    npf = len(loop.prefill_shapes)
    key_m = "ttft_s" if case.metric == "ttft_mean_s" else "tpot_s"
    workload, _ = harness_workload(case, clients)
    key, run = disagg_predictor(
        setup,
        (gp, ep_p, dp_p),
        workers,
        workload,
        limit,
        seats if seats != setup.max_seqs else None,
    )
    pick = SIM_METRICS[case.metric]
    stack = (
        1.0 if key_m == "ttft_s" else 0.0
    )  # the benchmark client's TTFT includes the serving stack
    return Plan(
        case,
        group_key(case),
        replace(lay, setup=setup),
        loop.prefill_shapes + loop.decode_shapes,
        lambda t, p: loop.metrics(t[:npf], t[npf:])[key_m] + stack * p.request_overhead_s,
        (f"{workers[0]} prefill x {gp} GPUs, {workers[1]} decode x {gd} GPUs",)
        + ((assumed,) if assumed else ())
        + pool_notes,
        run,
        key,
        lambda summary, p: float(pick(summary)) + stack * p.request_overhead_s,
        setups=(pf_setup,) * npf + (setup,) * len(loop.decode_shapes),
    )


def _energy(case: Case, models: StepModels) -> Plan:
    from infercast.validate.energy import energy_plan

    return energy_plan(case, models, Plan)


BUILDERS = {
    "energy": _energy,
    "disaggregated": _disaggregated,
    "speculative": _speculative,
    "kernel": _kernel,
    "single_stream": _single_stream,
    "static_batch": _static_batch,
    "offline": _offline,
    "concurrency": _concurrency,
    "server": _server,
}
