"""Background jobs for the page: a simulation or a plan runs in a thread, the page polls it.

A job reports progress as a fraction (0..1) and ends with a result dict or a
one-line error (and the form field it concerns). Few jobs run at once (the
machine's cores are the limit); old finished jobs are forgotten.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infercast.errors import InfercastError, with_flags
from infercast.ui.inputs import FieldError

Work = Callable[[Callable[[float], None]], dict[str, Any]]


@dataclass
class Job:
    """One background computation and what the page may see of it."""

    id: str
    kind: str
    started_s: float
    state: str = "running"  # running | done | error
    progress: float = 0.0
    result: dict[str, Any] | None = None
    error: str | None = None
    bad_field: str | None = None  # the form field an error concerns
    wall_s: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict[str, Any]:
        with self.lock:
            return {
                "id": self.id,
                "kind": self.kind,
                "state": self.state,
                "progress": self.progress,
                "result": self.result,
                "error": self.error,
                "field": self.bad_field,
                "wall_s": self.wall_s,
            }


class Jobs:
    """A small registry of background jobs (``max_running`` at once, ``keep`` remembered)."""

    def __init__(
        self, max_running: int = 2, keep: int = 32, clock: Callable[[], float] = time.monotonic
    ):
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.max_running, self.keep, self.clock = max_running, keep, clock

    def start(self, kind: str, work: Work) -> Job:
        """Run ``work(progress)`` in a daemon thread; FieldError if too many jobs run already."""
        with self._lock:
            running = sum(j.state == "running" for j in self._jobs.values())
            if running >= self.max_running:
                raise FieldError(
                    f"{running} computations are already running: wait for one to finish"
                )
            job = Job(f"{kind}-{next(self._ids)}", kind, self.clock())
            self._jobs[job.id] = job
            while len(self._jobs) > self.keep:
                oldest = next(iter(self._jobs))
                if self._jobs[oldest].state == "running":
                    break
                self._jobs.pop(oldest)
        threading.Thread(target=self._run, args=(job, work), name=job.id, daemon=True).start()
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def _run(self, job: Job, work: Work) -> None:
        def progress(fraction: float) -> None:
            with job.lock:
                job.progress = min(max(float(fraction), 0.0), 1.0)

        try:
            result = work(progress)
        except InfercastError as exc:
            message = with_flags(str(exc), {})  # the page names fields, not flags
            self._finish(job, error=message, field=getattr(exc, "field", None))
        except Exception as exc:  # a bug: the page gets one line, the server keeps serving
            self._finish(job, error=f"internal error ({type(exc).__name__}): {exc}")
        else:
            self._finish(job, result=result)

    def _finish(
        self,
        job: Job,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        field: str | None = None,
    ) -> None:
        with job.lock:
            job.state = "error" if error else "done"
            job.result, job.error, job.bad_field = result, error, field
            job.progress = 1.0 if result is not None else job.progress
            job.wall_s = self.clock() - job.started_s
