"""The fleet's plot names its members: replicas, or disaggregated units."""

import pytest

from infercast.report import fleet_plots


def _runs(member: str) -> dict:
    ticks = [
        {
            "t_s": 60.0 * (k + 1),
            "replicas_ready": 1,
            "replicas_starting": 0,
            "slo_attainment": 1.0,
            "arrival_rate_per_s": 2.0,
            "usd": None,
        }
        for k in range(3)
    ]
    day = {"usd_per_day": None, "replica_hours": 0.05, "slo_attainment": 0.9, "member": member}
    return {"fixed": {"day": day, "ticks": ticks}}


@pytest.mark.parametrize("member", ["replica", "unit"])
def test_the_plot_labels_its_members(member, tmp_path, monkeypatch):
    labels = []
    real = fleet_plots.pyplot

    def spy():
        plt = real()
        subplots = plt.subplots

        def wrapped(*a, **k):
            fig, axes = subplots(*a, **k)
            labels.append(axes)
            return fig, axes

        monkeypatch.setattr(plt, "subplots", wrapped)
        return plt

    monkeypatch.setattr(fleet_plots, "pyplot", spy)
    fleet_plots.plot_policies(_runs(member), str(tmp_path / "day.png"), "t")
    assert (tmp_path / "day.png").stat().st_size > 0
    cost, over_day, _ = labels[0]
    assert cost.get_xlabel() == f"{member}-hours"  # no price: cost in member-hours
    assert over_day.get_title() == f"{member}s over the day"
