"""cost/comm.py: link bytes of the collectives, and the times to move bytes over a link."""

from __future__ import annotations

import pytest

from infercast.cost.comm import (
    alltoall_link_bytes,
    kv_transfer_time_s,
    ring_allreduce_link_bytes,
    ring_allreduce_time_s,
    transfer_time_s,
)


def test_ring_allreduce_sends_two_n_minus_one_over_n_of_the_buffer():
    assert ring_allreduce_link_bytes(8e6, 4) == pytest.approx(2 * 3 / 4 * 8e6)
    assert ring_allreduce_link_bytes(8e6, 1) == 0.0  # one GPU: nothing to reduce
    assert ring_allreduce_time_s(8e6, 4, 1e11, 5e-6) == pytest.approx(1.2e7 / 1e11 + 5e-6)


def test_alltoall_sends_n_minus_one_over_n():
    assert alltoall_link_bytes(8e6, 8) == pytest.approx(7e6)
    assert alltoall_link_bytes(8e6, 1) == 0.0


def test_transfer_time_is_bytes_over_bandwidth_plus_a_latency_per_collective():
    assert transfer_time_s(1e9, 1e11, 1e-5, collectives=3) == pytest.approx(1e-2 + 3e-5)
    assert transfer_time_s(0.0, 1e11, 1e-5) == 0.0  # nothing sent, no latency paid
    assert transfer_time_s(1.0, 0.0, 0.0) == float("inf")  # no link


def test_kv_transfer_is_latency_plus_wire_time():
    nbytes = 1.28e8
    assert kv_transfer_time_s(nbytes, 2e10, 0.002) == pytest.approx(nbytes / 2e10 + 0.002)


def test_layer_overlap_hides_what_fits_under_the_prefill_but_never_the_last_layer():
    nbytes, layers = 1.28e8, 32
    wire = nbytes / 2e10
    hidden_all = kv_transfer_time_s(nbytes, 2e10, 0.002, 1.0, layers, overlap=True)
    assert hidden_all == pytest.approx(0.002 + wire / layers)
    # a short prefill hides only (L - 1) / L of its own time
    short = kv_transfer_time_s(nbytes, 2e10, 0.002, 1e-3, layers, overlap=True)
    assert short == pytest.approx(0.002 + wire - 1e-3 * (layers - 1) / layers)
    assert kv_transfer_time_s(nbytes, 2e10, 0.002, 1.0, layers) == pytest.approx(0.002 + wire)
