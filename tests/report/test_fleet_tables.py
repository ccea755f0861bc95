"""The fleet's printed report: header lines, one row per policy, the bottleneck story."""

from infercast.report.fleet_tables import print_fleet

HEADER = {
    "model": "m",
    "weights": "bf16",
    "hardware": "h100-sxm",
    "tp": 1,
    "load": "a flat day",
    "expected_requests": 1234.0,
    "hours": 1.0,
    "replica_capacity_rps": 5.0,
    "replica_start_s": 90.0,
    "price_per_gpu_hour": None,
    "price_source": "none",
    "slo": {"ttft_s": 2.0, "tpot_s": 0.1},
    "unit": "1 prefill (TP1) + 2 decode (TP1) replicas, 3 GPUs",
    "gpus_per_replica": 3,
}
DAY = {
    "slo_attainment": 0.5,
    "goodput_per_s": 1.25,
    "requests_rejected": 1200,
    "replica_hours": 2.0,
    "gpu_hours": 6.0,
    "peak_replicas": 3,
    "usd_per_day": None,
    "usd_per_million_tokens": None,
    "kwh_per_day": 4.0,
    "ttft_p99_s": 0.75,
    "policy_detail": "fixed 3 replicas",
    "bottleneck_changes": [{"t_s": 3600.0, "from": None, "to": "compute"}],
    "bottleneck_minutes": {"compute": 60},
    "reject_reasons": {"too long": 1200},
}


def test_print_fleet_shows_the_unit_each_policy_and_its_story(capsys):
    print_fleet(HEADER, {"fixed": {"day": DAY}}, 2e9, 60.0, "day.png")
    out = capsys.readouterr().out
    assert "one unit (1 prefill (TP1) + 2 decode" in out and "(weights / 2 GB/s + 60 s" in out
    assert "price - $/GPU-hour" in out  # no price: a dash, not None
    row = next(line for line in out.splitlines() if "fixed" in line and "%" in line)
    assert "50.0%" in row and "1,200" in row and "0.75" in row and "6.0" in row
    assert "unit-h" in out and "GPU-h" in out and "peak units" in out and "replica-h" not in out
    assert "GPU-h = unit-h x 3 GPUs" in out
    assert "1.0 h -> compute" in out and "rejected: {'too long': 1200}" in out
    assert out.rstrip().endswith("plot written to day.png")
