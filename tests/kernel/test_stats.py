import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerate.kernel.stats import (
    chance_adjusted,
    holm,
    mcnemar_exact,
    paired_difference_interval,
    wilson_interval,
)


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


# ---------------------------------------------------------------- paired comparisons


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),
        (3, 3, 1.0),
        (0, 5, 2 / 32),  # both tails of Binomial(5, 1/2) at the extremes
        (1, 9, 2 * 11 / 1024),  # P(X <= 1) = (1 + 10) / 2^10
        (9, 1, 2 * 11 / 1024),
        (0, 1, 1.0),  # 2 x 1/2, capped
        (4, 5, 1.0),
    ],
)
def test_mcnemar_exact_matches_hand_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-9)


@settings(deadline=None)  # the first example imports scipy
@given(st.integers(0, 400), st.integers(0, 400))
def test_mcnemar_exact_matches_scipy_s_binomial_test(b, c):
    from scipy.stats import binomtest

    expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-7, abs=1e-300)


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_mcnemar_exact_is_a_symmetric_probability(b, c):
    p = mcnemar_exact(b, c)
    assert 0.0 <= p <= 1.0
    assert p == pytest.approx(mcnemar_exact(c, b), rel=1e-12)


@given(st.integers(0, 200), st.integers(1, 50))
def test_mcnemar_exact_falls_as_the_discordance_grows(k, step):
    assert mcnemar_exact(k, k + step + 1) <= mcnemar_exact(k, k + step) + 1e-12


def test_mcnemar_exact_refuses_negative_counts():
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar_exact(-1, 3)


def test_holm_by_hand():
    got = holm([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005 x 4, 0.01 x 3, 0.03 x 2, 0.04 x 1 -> made non-decreasing
    assert got == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []
    assert holm([0.2]) == [0.2]
    assert holm([0.6, 0.7]) == [1.0, 1.0]


@given(st.lists(st.floats(0.0, 1.0), max_size=30))
def test_holm_is_monotone_never_below_the_raw_value_and_at_most_1(p_values):
    adjusted = holm(p_values)
    assert len(adjusted) == len(p_values)
    for p, q in zip(p_values, adjusted, strict=True):
        assert p <= q + 1e-15 and q <= 1.0
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    ranked = [adjusted[i] for i in order]
    assert ranked == sorted(ranked)
    if p_values:
        assert min(adjusted) == pytest.approx(min(1.0, len(p_values) * min(p_values)))


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_holm_refuses_what_is_not_a_p_value(bad):
    with pytest.raises(ValueError, match="p-values must lie in"):
        holm([0.1, bad])


def test_paired_interval_matches_bonett_price_by_hand():
    # b = 1, c = 7, n = 21: (c + 1) / 23 - (b + 1) / 23 = 6 / 23, half-width
    # 1.96 * sqrt((10 / 23 - (6 / 23)^2) / 23)
    low, high = paired_difference_interval(1, 7, 21)
    assert low == pytest.approx(0.01338, abs=1e-4)
    assert high == pytest.approx(0.50836, abs=1e-4)
    mirrored = paired_difference_interval(7, 1, 21)
    assert mirrored == pytest.approx((-high, -low))


def test_paired_interval_without_pairs_knows_nothing():
    assert paired_difference_interval(0, 0, 0) == (-1.0, 1.0)


@pytest.mark.parametrize(("b", "c", "n"), [(-1, 0, 5), (0, -1, 5), (3, 3, 5)])
def test_paired_interval_refuses_impossible_tables(b, c, n):
    with pytest.raises(ValueError, match=f"b={b}, c={c}, n={n}"):
        paired_difference_interval(b, c, n)


paired_tables = st.integers(1, 5000).flatmap(
    lambda n: st.tuples(st.integers(0, n)).flatmap(
        lambda t: st.tuples(st.just(t[0]), st.integers(0, n - t[0]), st.just(n))
    )
)


@given(paired_tables)
def test_paired_interval_contains_the_estimate_and_stays_in_range(table):
    b, c, n = table
    low, high = paired_difference_interval(b, c, n)
    assert -1.0 <= low <= (c - b) / n <= high <= 1.0
    assert low < high


@given(st.integers(10, 500), st.floats(0.0, 0.4), st.floats(0.0, 0.4))
def test_paired_interval_narrows_with_more_pairs(n, lost, gained):
    small = paired_difference_interval(round(lost * n), round(gained * n), n)
    large = paired_difference_interval(round(lost * 9 * n), round(gained * 9 * n), 9 * n)
    assert (large[1] - large[0]) < (small[1] - small[0])


@pytest.mark.parametrize(
    ("n", "p_lost", "p_gained"),
    [(30, 0.1, 0.1), (50, 0.05, 0.2), (100, 0.02, 0.02), (200, 0.3, 0.1), (40, 0.0, 0.05)],
)
def test_paired_interval_covers_the_true_difference_about_95_percent(n, p_lost, p_gained):
    import random

    rng = random.Random(20240611 + n)
    truth, trials, covered = p_gained - p_lost, 2000, 0
    for _ in range(trials):
        b = c = 0
        for _ in range(n):
            u = rng.random()
            b += u < p_lost
            c += p_lost <= u < p_lost + p_gained
        low, high = paired_difference_interval(b, c, n)
        covered += low <= truth <= high
    assert covered / trials >= 0.93
