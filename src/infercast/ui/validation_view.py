"""The Validation view: ``infercast validate``'s result over the shipped measurements, once per
server.

:class:`ValidationStore` runs what ``infercast validate --json`` runs (the shipped
cases, :class:`~infercast.validate.evaluate.Evaluator` with the shipped profile
set, ``validate.score.report`` with the floor check) in a background process when
the server starts, keeps the report, and answers a row's details: the CSV row
with its citation, and the prediction's breakdown (the replica setup the row was
predicted on, its step shapes with their expected times, the profile group, notes).
"""

from __future__ import annotations

import csv
import multiprocessing
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from infercast.ui.inputs import FieldError


class ValidationStore:
    """The validate report of this server's lifetime, computed once in a background process."""

    def __init__(self, data: str | None = None, clock: Callable[[], float] = time.monotonic):
        """``data``: a measurement CSV (``validate --data``); None = the shipped set."""
        self.data, self.clock = data, clock
        self._lock = threading.Lock()
        self.state, self.error, self.wall_s = "idle", None, None
        self.report: dict[str, Any] | None = None
        self._details: dict[str, dict[str, Any]] = {}
        self._proc = None

    def start(self) -> None:
        """Begin computing (once); returns at once."""
        with self._lock:
            if self.state != "idle":
                return
            self.state = "running"
        threading.Thread(target=self._run, name="validate", daemon=True).start()

    def _run(self) -> None:
        t0 = self.clock()
        # in a process of its own: a minute of numpy and Python in this process's threads would
        # hold the GIL against every estimate the page asks for meanwhile; daemonic, so it ends
        # with the server (stop() ends it at once)
        ctx = multiprocessing.get_context("spawn")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_compute_into, args=(self.data, send), name="infercast-validate", daemon=True
        )
        with self._lock:
            if self.state != "running":  # stopped before it began
                return
            self._proc = proc
            proc.start()
        send.close()
        try:
            ok, answer = recv.recv()
        except EOFError:
            ok, answer = (
                False,
                f"the validation process ended without an answer (exit code {proc.exitcode})",
            )
        proc.join()
        with self._lock:
            if not ok:
                self.state, self.error = "error", answer
                return
            self.report, self._details = answer
            self.state, self.wall_s = "done", self.clock() - t0

    def stop(self) -> None:
        """End a validation still running (the server is shutting down)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if self.state == "running":
                self.state, self.error = "error", "stopped"
        if proc is not None and proc.is_alive():
            proc.terminate()

    def status(self) -> dict[str, Any]:
        """State, and the report (rows and summary) once done."""
        with self._lock:
            return {
                "state": self.state,
                "error": self.error,
                "wall_s": self.wall_s,
                "report": self.report,
                "command": shlex.join(
                    [
                        "infercast",
                        "validate",
                        *(["--data", self.data] if self.data else []),
                        "--json",
                    ]
                ),
            }

    def row(self, row_id: str) -> dict[str, Any]:
        """One row's CSV fields (with citation) and its prediction's breakdown."""
        with self._lock:
            if self.state != "done":
                raise FieldError("the validation is still being computed: try again in a moment")
            detail = self._details.get(row_id)
        if detail is None:
            raise FieldError(f"no measurement row with id {row_id!r}", "id")
        return detail


def _csv_rows(data: str | None) -> dict[str, dict[str, str]]:
    """The measurements CSV as written (its citation column included), by id."""
    from infercast.specs.catalog import data_path

    with (Path(data) if data else data_path("measurements.csv")).open(newline="") as fh:
        return {r["id"]: dict(r) for r in csv.DictReader(fh)}


def _breakdown(plan, step_times: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "group": plan.group,
        "notes": list(plan.notes),
        "method": "simulator" if plan.simulate is not None else "closed form",
    }
    if plan.layout is not None:
        out.update(
            setup=asdict(plan.layout.setup),
            replicas=plan.layout.replicas,
            num_gpus=plan.layout.num_gpus,
        )
    out["steps"] = [
        {
            "runs": [{"count": c, "new_tokens": n, "cached_tokens": k} for c, n, k in shape],
            "expected_time_s": t,
        }
        for shape, t in zip(plan.shapes, step_times, strict=False)
    ]
    return out


def _compute_into(data: str | None, conn) -> None:
    """The child process's work: ``compute`` and send (ok, answer or one-line error) back."""
    try:
        answer = (True, compute(data))
    except Exception as exc:  # the page shows it as one line
        answer = (False, f"{type(exc).__name__}: {exc}")
    conn.send(answer)
    conn.close()


def compute(data: str | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(report, details by row id) as ``infercast validate [--data DATA] --json`` computes them."""
    from infercast.cost.profiles import load_profile_set
    from infercast.specs.engines import engine_family
    from infercast.validate.cases import load_cases
    from infercast.validate.evaluate import Evaluator
    from infercast.validate.ledger import profile_matrix
    from infercast.validate.score import floor_report, report

    profiles = load_profile_set(None)
    cases = load_cases(data)
    ev = Evaluator(cases, assume_weights="checkpoint")
    preds = ev.predict(profiles)
    rep = report(preds, profiles.name, floor_report(cases))
    profs = [profiles.for_group(g) for g in ev.groups]
    times = ev.ledger.times(profile_matrix(profs or [profiles.default]))
    for r in rep[
        "rows"
    ]:  # the engine filter groups versions: trtllm-1.0 and trtllm-1.3 are one engine
        r["engine_family"] = engine_family(r["engine"]) if r["engine"] else ""
    raw = _csv_rows(data)
    details = {}
    for i, p in enumerate(preds):
        plan = ev.plans[i]
        shape_times = [float(times[j]) for j in ev._shape_idx[i]] if plan is not None else []
        details[p.case.id] = {
            "row": raw.get(p.case.id, {}),
            "prediction": rep["rows"][i],
            "breakdown": _breakdown(plan, shape_times) if plan is not None else None,
        }
    return rep, details
