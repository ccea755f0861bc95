"""A content-addressed store of simulated predictions, so a repeated ``validate`` reuses them.

``validate --store DIR`` keeps one file per simulation, named by the SHA-256 of everything its
result depends on: the task's inputs (``repr`` of the :class:`~infercast.validate.simrun.SimTask`:
the replica's ``Setup`` and the ``SimConfig``, dataclasses whose ``repr`` lists every field), the
efficiency profile it is timed with, and the package itself (every file under ``infercast/``:
code, model and hardware tables, engine presets), so a change to any of them misses the store
instead of returning a stale result. Only results are stored, never failures.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import cache
from pathlib import Path

from infercast.errors import ConfigError


@cache
def package_digest() -> str:
    """SHA-256 over the path and bytes of every file of the installed package (once a process)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


class SimStore:
    """Results of simulations under ``root``, keyed by :meth:`key`."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"`root` {str(root)!r}: cannot create the directory ({exc.strerror}); "
                "give a writable directory"
            ) from None
        self.hits = self.misses = 0

    @staticmethod
    def key(task, profile) -> str:
        """The hex SHA-256 of the task's inputs, the profile and the package."""
        text = f"{package_digest()}\n{task!r}\n{profile!r}"
        return hashlib.sha256(text.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.pickle"

    def get(self, task, profile):
        """The stored result, or None (counted in ``hits`` / ``misses``)."""
        path = self._path(self.key(task, profile))
        try:
            with path.open("rb") as f:
                out = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError):  # absent, or a torn write
            self.misses += 1
            return None
        self.hits += 1
        return out

    def put(self, task, profile, result) -> None:
        """Store ``result`` atomically (a temporary file renamed into place)."""
        path = self._path(self.key(task, profile))
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
