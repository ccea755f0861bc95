"""Where evaluations run: in this process, a local process pool (default), or a Ray cluster.

Every evaluation is a pure function of its arguments, so the executors differ
only in where it runs; results come back in input order, and the plan is the
same whichever ran them (the Ray test checks it). Ray is optional
(``pip install 'infercast[ray]'``); ``--executor ray`` connects to
``RAY_ADDRESS`` when set, otherwise starts a local Ray.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from infercast.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")
EXECUTORS = ("local", "serial", "ray")


def default_executor() -> str:
    """``ray`` when a ``RAY_ADDRESS`` is set, else ``local``."""
    return "ray" if os.environ.get("RAY_ADDRESS") else "local"


def check_executor(executor: str) -> None:
    """Fail in well under a second on an unknown executor or a missing Ray, before any work."""
    if executor not in EXECUTORS:
        raise ConfigError(f"`executor` {executor!r}: use one of {', '.join(EXECUTORS)}")
    if executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ConfigError("`executor` ray needs Ray: pip install 'infercast[ray]'")


def run_map(
    fn: Callable[[T], R], items: Sequence[T], executor: str = "local", workers: int | None = None
) -> list[R]:
    """``[fn(x) for x in items]`` on the chosen executor, in order."""
    if executor not in EXECUTORS:
        raise ConfigError(f"`executor` {executor!r}: use one of {', '.join(EXECUTORS)}")
    if not items:
        return []
    if executor == "ray":
        return _ray_map(fn, items)
    workers = workers or os.cpu_count() or 1
    if executor == "serial" or workers == 1 or len(items) == 1:
        return [fn(x) for x in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork: workers inherit the loaded catalog and imports (spawn would re-import per worker).
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx) as pool:
        return list(pool.map(fn, items, chunksize=max(1, len(items) // (4 * workers))))


def _ray_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    try:
        import ray
    except ImportError:
        raise ConfigError("`executor` ray needs Ray: pip install 'infercast[ray]'") from None
    if not ray.is_initialized():
        ray.init(
            address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False
        )
    remote = ray.remote(fn)
    return ray.get([remote.remote(x) for x in items])
