"""Energy rows (scenario ``energy``): joules per output token of a batch served to the end.

The row's engine runs ``batch`` requests of ``input_tokens`` / ``output_tokens`` together
(the steady state the published figures measure): one prefill of the batch, then
``O - 1`` decode steps at the mean context ``I + O/2``. Each step's energy is the
power model's (:mod:`infercast.cost.energy`) at that step's tensor activity over
its predicted time; the value is the total over ``batch * O`` output tokens. A row that
states no lengths may give ``assumed_input_tokens`` / ``assumed_output_tokens`` in
``extra`` (the prediction then carries the assumption as a note).
"""

from __future__ import annotations

from infercast.cost.energy import power_model, tensor_busy_s
from infercast.errors import InfercastError
from infercast.validate.cases import Case
from infercast.validate.setup import Unpredictable, group_key, layout

METRICS = ("energy_per_output_token_j",)


def energy_plan(case: Case, models, plan_cls):
    """The :class:`~infercast.validate.predict.Plan` of an energy row (``plan_cls`` passed in so
    this module needs nothing from predict)."""
    if case.metric not in METRICS:
        raise Unpredictable(
            f"metric {case.metric} has no energy predictor (use {', '.join(METRICS)})"
        )
    lay = layout(case)
    sm = models.get(lay.setup)
    try:
        power = power_model(sm.hardware)
    except InfercastError as exc:
        raise Unpredictable(str(exc)) from None
    notes = list(lay.notes)
    i, o = case.input_tokens, case.output_tokens
    for name, value in (("input", i), ("output", o)):
        if value is None:
            key = f"assumed_{name}_tokens"
            if key not in case.extra:
                raise Unpredictable(f"the row states no {name}_tokens (nor extra.{key})")
            notes.append(f"{name} length assumed: {case.extra[key]} tokens")
    i = int(i if i is not None else case.extra["assumed_input_tokens"])
    o = int(o if o is not None else case.extra["assumed_output_tokens"])
    b = case.batch or 1
    prefill, decode = ((b, i, 0),), ((b, 1, i + o // 2),)
    busy = [
        tensor_busy_s(sm, sm.step_cost([n] * k, [c] * k)) for k, n, c in (prefill[0], decode[0])
    ]
    gpus = sm.parallel.gpus_per_replica

    def step_j(t: float, busy_s: float) -> float:
        return power.busy_power_w(min(1.0, busy_s / t) if t > 0 else 0.0) * t * gpus

    def combine(t, p):
        e_pre, e_dec = step_j(t[0], busy[0]), step_j(t[1], busy[1])
        return (e_pre + (o - 1) * e_dec) / (b * o)

    return plan_cls(case, group_key(case), lay, (prefill, decode), combine, tuple(notes))
