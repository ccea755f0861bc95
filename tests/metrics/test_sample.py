"""BoundedSample: exact below the cap, within the documented error above it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercast.metrics.sample import HIST_REL_ERROR, BoundedSample


def test_exact_below_cap_matches_numpy():
    rng = np.random.default_rng(0)
    vals = rng.lognormal(-4, 1, 5000)
    s = BoundedSample(exact_cap=10_000)
    for chunk in np.array_split(vals, 37):
        s.add(chunk)
    assert s.is_exact
    for q in (0, 1, 50, 90, 99, 100):
        assert s.percentile(q) == pytest.approx(np.percentile(vals, q), rel=1e-12)
    assert s.mean == pytest.approx(vals.mean(), rel=1e-12)
    assert s.std == pytest.approx(vals.std(), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sigma=st.floats(0.1, 3.0), cap=st.integers(0, 500))
def test_folded_percentiles_within_documented_error(seed, sigma, cap):
    rng = np.random.default_rng(seed)
    vals = rng.lognormal(-4.5, sigma, 3000)
    s = BoundedSample(exact_cap=cap)
    s.add(vals[:1000])
    s.add(vals[1000:])
    assert not s.is_exact
    srt = np.sort(vals)
    for q in (10, 50, 90, 99):
        # the value holding rank floor(q/100*(n-1)), as the histogram reports it
        truth = srt[int(np.floor(q / 100 * (vals.size - 1)))]
        assert abs(s.percentile(q) - truth) <= HIST_REL_ERROR * truth * 1.0001
    assert s.mean == pytest.approx(vals.mean(), rel=1e-9)
    assert s.std == pytest.approx(vals.std(), rel=1e-6)
    assert (s.min, s.max) == (vals.min(), vals.max())


def test_weights_repeat_values_and_zero_goes_to_bottom_bin():
    s = BoundedSample(exact_cap=0)
    s.add([0.0, 0.02], [3, 1])
    assert s.count == 4
    assert s.percentile(50) == 0.0
    assert s.percentile(100) == pytest.approx(0.02, rel=HIST_REL_ERROR)
    with pytest.raises(ValueError):
        s.values()


def test_empty_is_nan():
    s = BoundedSample()
    assert np.isnan(s.mean) and np.isnan(s.percentile(50)) and s.count == 0


@pytest.mark.parametrize("caps", [(10_000, 10_000), (100, 10_000), (100, 100), (10_000, 0)])
def test_merged_union_matches_numpy(caps):
    rng = np.random.default_rng(5)
    a_vals, b_vals = rng.lognormal(-4, 1, 700), rng.lognormal(-3, 0.5, 400)
    a, b = BoundedSample(caps[0]), BoundedSample(caps[1])
    a.add(a_vals)
    b.add(b_vals)
    m = a.merged(b)
    both = np.concatenate([a_vals, b_vals])
    assert (
        m.count == both.size
        and m.mean == pytest.approx(both.mean())
        and m.std == pytest.approx(both.std())
    )
    srt = np.sort(both)
    for q in (10, 50, 99):
        if m.is_exact:
            assert m.percentile(q) == pytest.approx(np.percentile(both, q), rel=1e-12)
        else:
            truth = srt[int(np.floor(q / 100 * (both.size - 1)))]
            assert abs(m.percentile(q) - truth) <= HIST_REL_ERROR * 1.0001 * truth
    assert m.is_exact == (caps == (10_000, 10_000))
    assert a.count == 700 and b.count == 400  # inputs untouched


def test_add_weighted_equals_add_with_weights_exact_and_folded():
    rng = np.random.default_rng(5)
    vals = rng.exponential(0.02, 3000)
    counts = rng.integers(0, 50, 3000)
    for cap in (10**6, 1000):  # stays exact; folds into the histogram
        a, b = BoundedSample(cap), BoundedSample(cap)
        for lo in range(0, 3000, 700):
            a.add(vals[lo : lo + 700], counts[lo : lo + 700])
            b.add_weighted(vals[lo : lo + 700], counts[lo : lo + 700])
        assert (a.count, a.min, a.max, a.is_exact) == (b.count, b.min, b.max, b.is_exact)
        assert b.mean == pytest.approx(a.mean, rel=1e-12) and b.std == pytest.approx(
            a.std, rel=1e-9
        )
        for q in (1, 50, 90, 99, 99.9):
            assert b.percentile(q) == a.percentile(q)
