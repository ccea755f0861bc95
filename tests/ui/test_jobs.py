"""Background jobs: progress, result, a one-line error, and a cap on how many run at once."""

from __future__ import annotations

import threading
import time

import pytest

from infercast.errors import ConfigError
from infercast.ui.inputs import FieldError
from infercast.ui.jobs import Jobs


def _wait(job):
    deadline = time.monotonic() + 10
    while job.to_dict()["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.01)
    return job.to_dict()


def test_a_job_reports_its_result_and_errors_stay_one_line():
    jobs = Jobs()
    ok = _wait(jobs.start("t", lambda progress: (progress(0.5), {"x": 1})[1]))
    assert ok["state"] == "done" and ok["result"] == {"x": 1} and ok["progress"] == 1.0

    def bad_input(progress):
        raise ConfigError("rate must be positive")

    def bug(progress):
        raise KeyError("k")

    assert _wait(jobs.start("t", bad_input))["error"] == "rate must be positive"
    assert _wait(jobs.start("t", bug))["error"] == "internal error (KeyError): 'k'"


def test_too_many_running_jobs_are_refused():
    gate = threading.Event()
    jobs = Jobs(max_running=1)
    first = jobs.start("t", lambda progress: (gate.wait(5), {})[1])
    with pytest.raises(FieldError, match="already running"):
        jobs.start("t", lambda progress: {})
    gate.set()
    assert _wait(first)["state"] == "done"
    assert jobs.get(first.id) is first and jobs.get("nope") is None
