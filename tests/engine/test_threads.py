"""The rule that puts each weight product on one thread or on all of them."""

from __future__ import annotations

import math

import pytest

from infercast.engine.threads import THREADED_MIN_WORK, product_threads, set_torch_threads


@pytest.mark.parametrize("kernel", sorted(THREADED_MIN_WORK))
def test_a_product_is_threaded_from_its_paths_crossover(kernel, monkeypatch):
    """Below the path's crossover (rows x cols x tokens weight-tokens) one thread, at or over
    it every thread asked for; one thread asked for is always one."""
    monkeypatch.setitem(THREADED_MIN_WORK, kernel, 1000 * 1000 * 8)
    assert product_threads(kernel, 1000, 1000, 7, 2) == 1
    assert product_threads(kernel, 1000, 1000, 8, 2) == 2
    assert product_threads(kernel, 1000, 1000, 9, 4) == 4
    assert product_threads(kernel, 1000, 1000, 9, 1) == 1


def test_a_path_measured_never_to_pay_stays_on_one_thread(monkeypatch):
    monkeypatch.setitem(THREADED_MIN_WORK, "widen", math.inf)
    assert product_threads("widen", 10**6, 10**6, 10**3, 2) == 1


def test_every_kernel_path_of_the_engine_has_a_crossover():
    """The names qlinear passes (numba loops, PyTorch's kernels, the widening)."""
    assert {"q4i", "q4", "int8", "bf16", "fp32", "torch", "widen"} <= set(THREADED_MIN_WORK)


def test_an_unknown_path_is_an_error():
    with pytest.raises(KeyError):
        product_threads("fp16", 10, 10, 1, 2)


class _FakeTorch:
    def __init__(self, n: int) -> None:
        self.n, self.sets = n, []

    def get_num_threads(self) -> int:
        return self.n

    def set_num_threads(self, n: int) -> None:
        self.sets.append(n)
        self.n = n


def test_torch_threads_are_set_only_when_they_change():
    fake = _FakeTorch(2)
    set_torch_threads(fake, 2)
    set_torch_threads(fake, 1)
    set_torch_threads(fake, 1)
    assert fake.sets == [1]
