"""Disaggregated fleet members: a unit of prefill and decode replicas, scaled as one.

A unit is the simulator's disaggregated mode (``sim/disagg.py``) on the fleet's event kernel:
``P`` prefill replicas and ``D`` decode replicas joined by the KV transfer, built from one
:class:`~infercast.sim.disagg.DisaggPools` shared by every unit of the day. The fleet routes
a request to the least loaded unit (``fleet/router.py``); inside the unit it goes to the
prefill replica with the fewest outstanding tokens (ties to the lowest index, the rule of
``sim/router.py``'s least-tokens), then, after its prefill and transfer, to a decode replica
as ``sim/disagg.py`` does. The autoscaler starts, drains and stops whole units, and a unit is
billed and powered for all its GPUs: ``P x prefill GPUs + D x decode GPUs``, each pool on
its own part (``[disaggregation.prefill/decode] hardware``) at that part's price and power.

The fleet observes a unit as it observes one replica (``fleet/run.py``): its queue and
running counts and preemptions are the sums over its replicas, its KV use the decode
pool's mean (where a request holds KV for its whole output), its busy time the mean over
its replicas (so a unit's utilization is in [0, 1] like a replica's). Its outstanding tokens
count each request from its arrival at the unit to its record (prefill, transfer and decode
alike), so a draining unit stops only when no request is left anywhere in it.

Energy of a unit (``unit_token_energy``): the idle power of all its GPUs, plus each prompt
token's dynamic energy on the prefill pool's cost model and each output token's on the
decode pool's (``cost/energy.py``'s per-token split, applied per pool), the decode batch
being the unit's mean running requests over its decode replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

from infercast.cost.energy import TokenEnergy, token_energy
from infercast.metrics.records import RequestRecord
from infercast.sched import Request
from infercast.sim.disagg import DisaggPools, build_disagg, disagg_pools


@dataclass(frozen=True)
class UnitShape:
    """What every unit of a day is made of: the config, its pools, their sizes and GPUs."""

    cfg: object  # SimConfig with a [disaggregation] section
    timer: object  # the top-level cost model the pools derive from
    pools: DisaggPools
    prefill_replicas: int
    decode_replicas: int

    @property
    def prefill_gpus(self) -> int:
        return self.prefill_replicas * self.pools.prefill_sm.parallel.gpus_per_replica

    @property
    def decode_gpus(self) -> int:
        return self.decode_replicas * self.pools.decode_sm.parallel.gpus_per_replica

    @property
    def gpus(self) -> int:
        return self.prefill_gpus + self.decode_gpus

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights all the unit's GPUs load when it starts."""
        p = self.pools
        return (
            p.prefill_sm.memory.weight_bytes * self.prefill_gpus
            + p.decode_sm.memory.weight_bytes * self.decode_gpus
        )

    @property
    def prefill_hardware(self) -> str:
        return self.pools.prefill_sm.hardware.key

    @property
    def decode_hardware(self) -> str:
        return self.pools.decode_sm.hardware.key

    def describe(self) -> str:
        p, d = self.pools.prefill_sm.parallel, self.pools.decode_sm.parallel
        ph, dh = self.prefill_hardware, self.decode_hardware
        where = ("", "") if ph == dh else (f"{ph} ", f"{dh} ")
        return (
            f"{self.prefill_replicas} prefill ({where[0]}TP{p.tp}) + {self.decode_replicas} "
            f"decode ({where[1]}TP{d.tp}) replicas, {self.gpus} GPUs"
        )

    def usd_per_hour(self, prefill_price: float, decode_price: float) -> float:
        """Dollars per unit-hour: every GPU of each pool at its own part's $/GPU-hour."""
        return self.prefill_gpus * prefill_price + self.decode_gpus * decode_price


def unit_shape(cfg, timer) -> UnitShape:
    """The units of ``cfg`` (its ``[disaggregation]`` pools around the cost model ``timer``)."""
    d = cfg.disaggregation
    return UnitShape(cfg, timer, disagg_pools(cfg, timer), d.prefill.replicas, d.decode.replicas)


def unit_token_energy(
    shape: UnitShape,
    power,
    prompt_tokens: int,
    unit_running: int,
    decode_context: int,
    decode_power=None,
) -> TokenEnergy:
    """A unit's per-token energy (module doc): prefill pool for prompts, decode pool for outputs
    at a batch of ``unit_running`` / decode replicas, idle power of every GPU
    (``TokenEnergy.idle_w`` is per unit). ``power`` is the prefill pool's part's power model,
    ``decode_power`` the decode pool's (default: the same part's)."""
    p = shape.pools
    decode_batch = max(1, round(unit_running / shape.decode_replicas))
    dpower = power if decode_power is None else decode_power
    pre = token_energy(p.prefill_sm, power, prompt_tokens, decode_batch, decode_context)
    dec = token_energy(p.decode_sm, dpower, prompt_tokens, decode_batch, decode_context)
    return TokenEnergy(
        pre.prefill_dynamic_j_per_token,
        dec.decode_dynamic_j_per_token,
        pre.idle_w * shape.prefill_replicas + dec.idle_w * shape.decode_replicas,
        dec.busy_w_decode,
    )


class _Driver:
    """What ``build_disagg`` asks of its driver: lists to fill, where records go (rejections,
    and every finish without a completion sink) and the decode replicas' completion sink."""

    closed = False
    itl = None

    def __init__(self, emit, completions=None) -> None:
        self.emit = emit
        self.completions = completions
        self.replicas: list = []  # the prefill replicas (routed)
        self.unrouted: list = []  # the decode replicas


class _NoSeries:
    observe = None


class _UnitKV:
    __slots__ = ("_decode",)

    def __init__(self, decode: list) -> None:
        self._decode = decode

    @property
    def usage(self) -> float:
        return sum(r.sched.kv.usage for r in self._decode) / len(self._decode)


class _UnitSched:
    """A unit's scheduler counts as the fleet reads a replica's (module doc)."""

    __slots__ = ("_unit", "kv")

    def __init__(self, unit: DisaggUnit) -> None:
        self._unit = unit
        self.kv = _UnitKV(unit.decode)

    @property
    def num_waiting(self) -> int:
        return sum(r.sched.num_waiting for r in self._unit.replicas)

    @property
    def num_running(self) -> int:
        return sum(r.sched.num_running for r in self._unit.replicas)

    @property
    def num_preemptions(self) -> int:
        return sum(r.sched.num_preemptions for r in self._unit.replicas)

    @property
    def has_unfinished(self) -> bool:
        return bool(self._unit.in_flight)


class _UnitStats:
    __slots__ = ("_unit",)

    def __init__(self, unit: DisaggUnit) -> None:
        self._unit = unit

    @property
    def busy_s(self) -> float:
        reps = self._unit.replicas
        return sum(r.stats.busy_s for r in reps) / len(reps)


class _UnitFinished:
    """The decode replicas' completion sink (``sim/collect.Completions``): a completed request
    leaves the unit as scalars, no record and no token times (``fleet/run.py``'s ``_Finished``)."""

    __slots__ = ("_unit",)
    wants_times = False
    posts_events = True  # the fleet may serve its queue

    def __init__(self, unit: DisaggUnit) -> None:
        self._unit = unit

    def add(self, req, finish_s, times=None) -> None:
        u = self._unit
        u.outstanding_tokens -= u.in_flight.pop(req.request_id, 0)
        u._complete_up(req, finish_s, u.index)


class DisaggUnit:
    """One unit on the fleet's kernel; looks to the fleet like one replica (module doc).

    ``complete`` (the fleet's ``_complete``): completed requests come back as scalars; None:
    every finished request is a record through ``emit``."""

    def __init__(self, index: int, shape: UnitShape, kernel, emit, complete=None) -> None:
        self.index = index
        self._emit_up = emit
        self._complete_up = complete
        self.in_flight: dict[str, int] = {}  # request id -> its tokens counted in outstanding
        self.outstanding_tokens = 0
        driver = _Driver(self._emit, _UnitFinished(self) if complete is not None else None)
        build_disagg(shape.cfg, shape.timer, kernel, driver, _NoSeries, shape.pools)
        self.prefill: list = driver.replicas
        self.decode: list = driver.unrouted
        self.replicas = [*self.prefill, *self.decode]
        self.sched = _UnitSched(self)
        self.stats = _UnitStats(self)

    def submit(self, req: Request) -> None:
        tokens = req.prompt_tokens + req.max_output_tokens  # before prefill caps its output
        self.in_flight[req.request_id] = tokens
        self.outstanding_tokens += tokens
        pf = self.prefill
        target = pf[0] if len(pf) == 1 else min(pf, key=lambda r: r.outstanding_tokens)
        target.submit(req)

    def _emit(self, rec: RequestRecord, index: int) -> None:
        """A record from any of the unit's replicas: the request has left the unit."""
        self.outstanding_tokens -= self.in_flight.pop(rec.request_id, 0)
        self._emit_up(rec, self.index)
