"""Kaplan-Meier against a textbook table, and invariants over random data."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.survival import kaplan_meier

# Freireich et al. (1963), the 6-MP arm of the leukaemia remission trial: weeks in remission,
# + censored. The textbook table (Kleinbaum and Klein, "Survival Analysis", table 2.2; the
# same in Collett and in R's survival package): time, at risk, events, S(t), Greenwood SE.
SIX_MP = [6, 6, 6, "6+", 7, "9+", 10, "10+", "11+", 13, 16, "17+", "19+", "20+", 22, 23, "25+",
          "32+", "32+", "34+", "35+"]  # fmt: skip
TABLE = [
    (6, 21, 3, 0.8571, 0.0764),
    (7, 17, 1, 0.8067, 0.0869),
    (10, 15, 1, 0.7529, 0.0963),
    (13, 12, 1, 0.6902, 0.1068),
    (16, 11, 1, 0.6275, 0.1141),
    (22, 7, 1, 0.5378, 0.1282),
    (23, 6, 1, 0.4482, 0.1346),
]


def test_the_6mp_arm_matches_the_textbook_table():
    times = [float(str(t).rstrip("+")) for t in SIX_MP]
    observed = [not str(t).endswith("+") for t in SIX_MP]
    curve = kaplan_meier(times, observed)
    assert (curve.n, curve.censored) == (21, 12)
    got = list(zip(curve.times, curve.at_risk, curve.events, curve.survival, curve.se, strict=True))
    for (t, n, d, s, se), want in zip(got, TABLE, strict=True):
        assert (t, n, d) == want[:3]
        assert s == pytest.approx(want[3], abs=5e-5) and se == pytest.approx(want[4], abs=5e-5)
    assert curve.median == 23  # survival 0.448 at 23 weeks, 0.538 before
    # the log-log band from the table's own S and SE: S^exp(-+1.96 SE / (S |ln S|))
    for (_, _, _, s, se), low, high in zip(TABLE, curve.low, curve.high, strict=True):
        spread = 1.959964 * se / (s * abs(math.log(s)))
        assert low == pytest.approx(s ** math.exp(spread), abs=2e-4)
        assert high == pytest.approx(s ** math.exp(-spread), abs=2e-4)
    below = [t for t, low in zip(curve.times, curve.low, strict=True) if low <= 0.5]
    assert curve.median_interval == (below[0], None)  # the upper band never reaches 0.5


def test_no_censoring_is_the_empirical_share_still_waiting():
    curve = kaplan_meier([1, 2, 2, 3], [True] * 4)
    assert curve.survival == pytest.approx((0.75, 0.25, 0.0))
    assert curve.median == 2 and (curve.low[-1], curve.high[-1]) == (0.0, 1.0)  # not placed


def test_a_curve_that_reaches_zero_places_no_upper_limit_it_has_no_band_for():
    """A fresh-eyes review: the band at a survival of 0 was (0, 0), so one answer gave a
    median interval of (10, 10), and four a limit of 4 that only the collapse gave (the
    upper band was 0.665 at 3). R's survival package leaves the band there undefined."""
    assert kaplan_meier([10], [True]).median_interval == (10.0, None)
    assert kaplan_meier([1, 2, 3, 4], [True] * 4).median_interval == (1.0, None)
    assert kaplan_meier(list(range(1, 101)), [True] * 100).median_interval == (40.0, 60.0)


def test_all_censored_or_empty_has_no_median():
    assert kaplan_meier([5, 9], [False, False]).median is None
    empty = kaplan_meier([], [])
    assert (empty.n, empty.median, empty.times) == (0, None, ())
    with pytest.raises(ValueError, match="2 times but 1"):
        kaplan_meier([1, 2], [True])
    with pytest.raises(ValueError, match="finite"):
        kaplan_meier([math.inf], [True])


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=60))
def test_a_curve_falls_stays_in_its_band_and_counts_everyone(pairs):
    curve = kaplan_meier([t for t, _ in pairs], [seen for _, seen in pairs])
    assert sum(curve.events) == sum(seen for _, seen in pairs)
    assert list(curve.survival) == sorted(curve.survival, reverse=True)
    for s, low, high in zip(curve.survival, curve.low, curve.high, strict=True):
        assert 0 <= low <= s + 1e-12 and s - 1e-12 <= high <= 1


def test_the_median_is_the_first_time_half_or_fewer_still_wait():
    """A mutation sweep: `s < 0.5` passed every test (the median of two answers at 1 and 2
    tokens is 1: half still wait after 1); and where everyone still at risk ends, the
    variance is infinite, so no standard error (0.0 passed)."""
    curve = kaplan_meier([1, 2], [True, True])
    assert curve.survival == (0.5, 0.0)
    assert curve.median == 1
    assert curve.se[0] == pytest.approx(math.sqrt(0.25 * (1 / (2 * 1))))  # Greenwood
    assert curve.se[1] is None
