"""A day of load from a long public trace: a window at the trace's own time, in its own format."""

from datetime import datetime, timedelta

import numpy as np
import pytest

from infercast.errors import ConfigError
from infercast.fleet.load import day_load, parse_window


def _three_days_azure_2024(path):
    """Azure 2024's format (date-time TIMESTAMP): a request every 60 s on day 0, 30 s on day 1,
    20 s on day 2."""
    t0 = datetime(2024, 5, 10)
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for day, gap in enumerate((60, 30, 20)):
        for k in range(86400 // gap):
            t = t0 + timedelta(seconds=day * 86400 + k * gap + 1)
            rows.append(f"{t:%Y-%m-%d %H:%M:%S.%f},{100 + day},{10 + day}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_window_is_the_chosen_day_at_its_own_time(tmp_path):
    trace = _three_days_azure_2024(tmp_path / "week.csv")
    load = day_load(None, 24, str(trace), window=(24, 24))
    assert load.minutes == 24 * 60
    assert load.rates_per_s == pytest.approx(np.full(24 * 60, 2 / 60))  # day 1: two a minute
    assert load.expected_requests == pytest.approx(2880)
    assert set(load.lengths.prompt_tokens.tolist()) == {101}  # lengths from that day only
    assert "hours 24-48" in load.source


def test_window_rescaled_to_a_peak_keeps_its_shape(tmp_path):
    trace = _three_days_azure_2024(tmp_path / "week.csv")
    load = day_load(10.0, 36, str(trace), window=(12, 36))  # half of day 0, all of day 1
    assert load.rates_per_s.max() == pytest.approx(10.0)
    assert load.rates_per_s[0] == pytest.approx(5.0)  # day 0 ran at half day 1's rate


def test_burstgpt_columns_are_read(tmp_path):
    path = tmp_path / "burst.csv"
    path.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n65,GPT-4,1087,230,1317,API log\n"
        "125,GPT-4,9,9,18,API log\n"
    )
    load = day_load(None, 2 / 60, str(path), window=(0, 2 / 60))
    assert load.rates_per_s.tolist() == pytest.approx([1 / 60, 1 / 60])
    assert sorted(load.lengths.output_tokens.tolist()) == [18, 230]


@pytest.mark.parametrize("text", ["48", "a:b", "-1:24", "0:0", "0:400"])
def test_bad_window_names_the_flag(text):
    with pytest.raises(ConfigError, match="--trace-window"):
        parse_window(text)


def test_window_past_the_trace_end_says_its_span(tmp_path):
    trace = _three_days_azure_2024(tmp_path / "week.csv")
    with pytest.raises(ConfigError, match="spans only 71.99 h"):
        day_load(None, 24, str(trace), window=(60, 24))
    with pytest.raises(ConfigError, match="needs --trace"):
        day_load(5.0, 24, None, window=(0, 24))


def test_shipped_rate_trace_is_its_windows_rate_per_minute():
    """ServeGen's m-large: 10-minute windows over 14 days; each minute runs at its window's rate."""
    from infercast.fleet.load import rate_trace_rates

    day2 = day_load(None, 24, "servegen-m-large", window=(24, 24))
    assert day2.minutes == 24 * 60 and day2.lengths.name == "azure-conv"
    per_window = day2.rates_per_s.reshape(-1, 10)
    assert (per_window == per_window[:, :1]).all()  # constant within a window
    assert 50 < per_window.mean() < 600  # a production service's hundreds of req/s, not a shape
    scaled = rate_trace_rates("servegen-m-large", 24, 24, 5.0)
    assert scaled.max() == pytest.approx(5.0)
    assert scaled == pytest.approx(day2.rates_per_s * 5.0 / day2.rates_per_s.max())
    first = day_load(2.0, 3, "servegen-m-small", input_tokens=100, output_tokens=10)
    assert first.minutes == 180 and "hours 0-3" in first.source and first.lengths is None
    with pytest.raises(ConfigError, match="spans 336 h"):
        day_load(None, 24, "servegen-m-mid", window=(330, 24))
