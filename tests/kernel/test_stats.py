import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel.stats import chance_adjusted, wilson_interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Textbook values (Newcombe 1998, Table I; Brown, Cai & DasGupta 2001)
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
    ],
)
def test_wilson_matches_published_values(successes, n, low, high):
    got = wilson_interval(successes, n)
    assert got[0] == pytest.approx(low, abs=1e-4)
    assert got[1] == pytest.approx(high, abs=1e-4)


def test_no_trials_means_nothing_is_known():
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("successes", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_impossible_counts_raise(successes, n):
    with pytest.raises(ValueError, match=f"successes={successes}, n={n}"):
        wilson_interval(successes, n)


@given(st.integers(1, 100_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_estimate_and_stays_in_range(pair):
    successes, n = pair
    low, high = wilson_interval(successes, n)
    assert 0.0 <= low <= successes / n <= high <= 1.0
    assert low < high


@given(st.integers(1, 1000), st.floats(0.05, 0.95))
def test_wilson_narrows_with_more_trials(n, p):
    small = wilson_interval(round(p * n), n)
    large = wilson_interval(round(p * 4 * n), 4 * n)
    assert (large[1] - large[0]) < (small[1] - small[0])


@given(st.integers(0, 1000).flatmap(lambda s: st.tuples(st.just(s), st.integers(s, 2000))))
def test_wilson_is_symmetric(pair):
    successes, n = pair
    if n == 0:
        return
    low, high = wilson_interval(successes, n)
    mirror_low, mirror_high = wilson_interval(n - successes, n)
    assert math.isclose(low, 1 - mirror_high, abs_tol=1e-12)
    assert math.isclose(high, 1 - mirror_low, abs_tol=1e-12)


def test_chance_adjusted():
    assert chance_adjusted(0.25, 0.25) == 0.0
    assert chance_adjusted(1.0, 0.25) == 1.0
    assert chance_adjusted(0.5, 0.0) == 0.5
    assert chance_adjusted(0.0, 0.5) == -1.0
    assert chance_adjusted(None, 0.5) is None
    assert chance_adjusted(1.0, 1.0) is None
