"""What the gate can see: the minimum detectable drop against the power of the gate itself
(exact McNemar per group, Holm over the groups with a discordant pair), simulated night by
night; and the family-wise false-alarm rate of that Holm step."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.power import minimum_detectable_drop, regression_power
from numerate.kernel.stats import holm, holm_over_discordant, mcnemar_exact
from tests.examples import examples

ALPHA = 0.05


def night(rng, n: int, discordance: float, drop: float, others: int, other_discordance: float):
    """One night's (lost, gained) per group: group 0 dropped by `drop`, `others` unchanged."""
    psi = max(discordance, drop)
    shares = [(psi + drop) / 2, (psi - drop) / 2, 1 - psi]
    groups = [tuple(rng.multinomial(n, shares)[:2])]
    null = [other_discordance / 2, other_discordance / 2, 1 - other_discordance]
    groups += [tuple(rng.multinomial(n, null)[:2]) for _ in range(others)]
    return [(int(lost), int(gained)) for lost, gained in groups]


def flagged(groups, adjust=holm_over_discordant) -> list[bool]:
    """The gate's verdicts: a regression where the adjusted p-value is below alpha and more
    pairs were lost than gained (numerate.results.compare with these counts)."""
    p = [mcnemar_exact(lost, gained) for lost, gained in groups]
    if adjust is holm_over_discordant:
        adjusted = holm_over_discordant(p, [lost + gained for lost, gained in groups])
    else:
        adjusted = adjust(p)
    return [a < ALPHA and lost > gained for a, (lost, gained) in zip(adjusted, groups, strict=True)]


def simulated_power(n, discordance, drop, others, other_discordance, nights, seed) -> float:
    rng = np.random.default_rng(seed)
    caught = sum(
        flagged(night(rng, n, discordance, drop, others, other_discordance))[0]
        for _ in range(nights)
    )
    return caught / nights


SCENARIOS = {
    # a stochastic model (temperature > 0): 30% of pairs differ from night to night anyway
    "stochastic, one of 15 groups": dict(n=200, discordance=0.3, others=14, other_discordance=0.3),
    "stochastic, tested alone": dict(n=400, discordance=0.2, others=0, other_discordance=0.0),
    # temperature 0: only the lost cases change, the other 14 groups have no discordant pair
    "deterministic, one of 15 groups": dict(
        n=200, discordance=0.0, others=14, other_discordance=0.0
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_minimum_detectable_drop_is_where_the_gate_reaches_80_percent(name):
    s = SCENARIOS[name]
    family = 1 + (s["others"] if s["other_discordance"] > 0 else 0)
    drop = minimum_detectable_drop(s["n"], round(s["discordance"] * s["n"]), ALPHA, family)
    assert drop is not None
    below = simulated_power(s["n"], s["discordance"], drop - 0.01, s["others"],
                            s["other_discordance"], nights=3000, seed=30)  # fmt: skip
    above = simulated_power(s["n"], s["discordance"], drop + 0.01, s["others"],
                            s["other_discordance"], nights=3000, seed=31)  # fmt: skip
    assert below < 0.8 < above, (name, drop, below, above)


def test_power_model_matches_a_direct_simulation():
    # the exact power sum against the simulated gate at one drop (a single group)
    exact = regression_power(300, 0.25, 0.08, ALPHA)
    simulated = simulated_power(300, 0.25, 0.08, 0, 0.0, nights=4000, seed=32)
    assert simulated == pytest.approx(exact, abs=0.03)


def test_too_few_pairs_detect_nothing():
    assert minimum_detectable_drop(5, 0, ALPHA, family=15) is None
    assert minimum_detectable_drop(0, 0, ALPHA) is None


@pytest.mark.parametrize(
    ("n", "discordant", "alpha", "family"), [(10, 11, 0.05, 1), (10, 1, 0.0, 1), (10, 1, 0.05, 0)]
)
def test_impossible_arguments_raise(n, discordant, alpha, family):
    with pytest.raises(ValueError):
        minimum_detectable_drop(n, discordant, alpha, family)


def test_holm_over_discordant_groups_keeps_the_family_wise_rate():
    # 40 unchanged groups: 10 of a stochastic model, 30 deterministic ones (no discordant pair)
    rng = np.random.default_rng(33)
    nights, alarms = 4000, 0
    for _ in range(nights):
        groups = [tuple(rng.multinomial(200, [0.15, 0.15, 0.7])[:2]) for _ in range(10)]
        groups += [(0, 0)] * 30
        p = [mcnemar_exact(int(a), int(b)) for a, b in groups]
        adjusted = holm_over_discordant(p, [int(a + b) for a, b in groups])
        alarms += any(x < ALPHA for x in adjusted)
    assert alarms / nights <= ALPHA, alarms / nights


def test_groups_without_discordant_pairs_no_longer_dilute_the_family():
    # temperature 0, one group loses 4% of its cases, 14 groups unchanged
    rng = np.random.default_rng(34)
    nights = [night(rng, 200, 0.0, 0.04, 14, 0.0) for _ in range(2000)]
    now = sum(flagged(groups)[0] for groups in nights) / len(nights)
    before = sum(flagged(groups, adjust=holm)[0] for groups in nights) / len(nights)
    assert now > before + 0.2, (now, before)


def test_no_discordant_pair_gives_p_one():
    assert holm_over_discordant([1.0, 0.01, 1.0], [0, 5, 0]) == [1.0, 0.01, 1.0]
    assert holm_over_discordant([0.01, 0.02], [3, 4]) == holm([0.01, 0.02])


def _halving(n, discordant, level):
    """The answer by plain halving over [0, 1] (30 steps), the exact power summed over every
    discordant count 0..n: what minimum_detectable_drop's faster search must agree with."""
    from scipy import stats

    counts = np.arange(n + 1)
    critical = []
    for d in counts:  # the fewest lost, more than half, whose p-value is below the level
        lost = np.arange(d // 2 + 1, d + 1)
        below = lost[2 * stats.binom.sf(lost - 1, d, 0.5) < level]
        critical.append(below[0] if below.size else d + 1)
    critical = np.array(critical)

    def power(drop):
        psi = min(1.0, max(discordant / n, drop))
        share = min(1.0, (psi + drop) / (2 * psi))
        flagged = stats.binom.sf(critical - 1, counts, share)
        return float(np.sum(stats.binom.pmf(counts, n, psi) * flagged))

    if power(1.0) < 0.8:
        return None
    low, high = 0.0, 1.0
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (low, middle) if power(middle) >= 0.8 else (middle, high)
    return high


@examples(40)
@given(
    n=st.integers(1, 400),
    share=st.floats(0.0, 1.0),
    level=st.sampled_from([0.1, 0.05, 0.01, 0.05 / 15]),
)
def test_the_search_agrees_with_halving_over_every_count(n, share, level):
    """The drop found by regula falsi over the likely counts only equals, to 2e-9, the one
    found by halving with every count summed and the critical counts found one by one."""
    discordant = round(share * n)
    found = minimum_detectable_drop(n, discordant, level)
    expected = _halving(n, discordant, level)
    assert (found is None) == (expected is None)
    if found is not None:
        assert abs(found - expected) < 2e-9


def test_the_search_stops_once_its_bracket_is_closed(monkeypatch):
    """On 66,700 pairs the bracket closed to a rounding error over TOLERANCE, and the search
    evaluated the power at its lower end again and again until its 100th step (1 s each
    comparison of a large run's tiers). It takes a handful of evaluations, as elsewhere."""
    from numerate.kernel import power

    evaluations = []
    exact = power._power
    monkeypatch.setattr(power, "_power", lambda *a: evaluations.append(a[2]) or exact(*a))
    found = minimum_detectable_drop.__wrapped__(66_700, 20_000, 0.05, 10)
    # the smallest drop by its definition: the power reaches 80% there, and not 2e-9 below
    assert regression_power(66_700, 20_000 / 66_700, found, 0.05 / 10) >= 0.8
    assert regression_power(66_700, 20_000 / 66_700, found - 2e-9, 0.05 / 10) < 0.8
    assert len(evaluations) < 20


def test_a_drop_above_one_half_is_found_where_only_such_a_drop_is_caught():
    """A mutation sweep: asking whether any drop is caught at a drop of 0.5 instead of 1 passed
    every test; 12 pairs, none differing, catch only a drop above one half (80% of nights)."""
    drop = minimum_detectable_drop(12, 0, ALPHA)
    assert drop is not None and drop > 0.5
    below = simulated_power(12, 0.0, drop - 0.02, 0, 0.0, nights=4000, seed=33)
    above = simulated_power(12, 0.0, drop + 0.02, 0, 0.0, nights=4000, seed=34)
    assert below < 0.8 < above, (drop, below, above)


@pytest.mark.parametrize("level", [0.25, 0.125, 0.05, 0.01])
def test_the_critical_lost_count_rejects_strictly_below_the_level(level):
    """A mutation sweep: `tail > level` passed every test; at a level that is a power of two,
    a p-value equal to it (all 3 pairs lost at 1/4, all 4 at 1/8) must not reject. Against
    the McNemar p-value in exact fractions, for every discordant count up to 40."""
    from fractions import Fraction
    from math import comb

    from numerate.kernel.power import _critical_lost

    def p_value(lost: int, d: int) -> Fraction:  # McNemar's, exactly: no rounding at the level
        return min(Fraction(1), 2 * Fraction(sum(comb(d, i) for i in range(lost, d + 1)), 2**d))

    counts = np.arange(0, 41)
    for d, critical in zip(counts, _critical_lost(counts, level), strict=True):
        rejecting = [lost for lost in range(d + 1)
                     if lost > d - lost and p_value(lost, int(d)) < Fraction(level)]  # fmt: skip
        assert critical == (rejecting[0] if rejecting else d + 1), (d, level)
