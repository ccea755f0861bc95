"""The engine tests' loopback server (tests/engine/conftest.py), shared with the fuzz suite."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "engine_conftest", Path(__file__).parents[1] / "engine" / "conftest.py"
)
_engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_engine)


@pytest.fixture(scope="module")
def start_server():
    """:func:`running_server` of the engine tests: a real server on a free 127.0.0.1 port."""
    return _engine.running_server
