"""Plots that read: latency axes without overlapping ticks, SLO lines, one validate panel per unit,
labelled roofline points."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from infercast.report.axes import latency_axis, slo_line  # noqa: E402
from infercast.report.plots import _label_clusters  # noqa: E402
from infercast.report.validate_plots import _unit  # noqa: E402


def test_narrow_latency_range_is_linear_wide_is_log():
    fig, (a, b) = plt.subplots(1, 2)
    latency_axis(
        a, np.array([6.7, 6.9, 7.1])
    )  # TPOT in ms: a log axis would label overlapping minors
    latency_axis(b, np.array([5.0, 80.0, 4000.0]))
    assert a.get_xscale() == "linear" and b.get_xscale() == "log"
    plt.close(fig)


def test_slo_line_only_when_given():
    fig, ax = plt.subplots()
    slo_line(ax, None)
    assert not ax.lines
    slo_line(ax, 200.0)
    assert ax.lines[0].get_label() == "SLO 200 ms"
    plt.close(fig)


def test_validate_panels_split_by_unit():
    units = {
        m: _unit(m)
        for m in (
            "ttft_mean_s",
            "output_throughput_total",
            "tokens_per_s_single_stream",
            "achieved_bandwidth_bytes_per_s",
            "matmul_flops_per_s",
            "speedup",
        )
    }
    assert units == {
        "ttft_mean_s": "s",
        "output_throughput_total": "tokens/s",
        "tokens_per_s_single_stream": "tokens/s",
        "achieved_bandwidth_bytes_per_s": "bytes/s",
        "matmul_flops_per_s": "FLOP/s",
        "speedup": "ratio",
    }


def test_roofline_labels_one_per_cluster_of_ops():
    pts = [(300.0, 7e14, "q_proj"), (310.0, 7.1e14, "o_proj"), (1.0, 2e12, "mlp.act")]
    labels = sorted(t for *_, t in _label_clusters(pts))
    assert labels == ["mlp.act", "q_proj, o_proj"]


def test_simulate_plots_draw_the_slo(tmp_path):
    from infercast.cli import main

    main(
        [
            "simulate",
            "--request-rate",
            "2,4",
            "--num-prompts",
            "30",
            "--slo-ttft-ms",
            "100",
            "--no-progress",
            "--json",
            "--plot",
            str(tmp_path),
        ]
    )
    assert (tmp_path / "latency_cdf.png").stat().st_size > 10_000 and (
        tmp_path / "vs_rate.png"
    ).is_file()
