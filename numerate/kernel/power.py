"""What a paired comparison can see: the power of its exact McNemar test, and the smallest
drop in accuracy it would flag with 80% probability. Pure functions (numpy and scipy).

The model of a drop: pairs are independent; a share `discordance` of them differ between the
runs (the noise of a stochastic model, or real changes); a true drop of `drop` accuracy points
moves the discordant pairs toward "lost": lost ~ (psi + drop) / 2, gained ~ (psi - drop) / 2
of all pairs, with psi = max(discordance, drop) (a drop of 10 points needs at least 10% of
the pairs to change). The test flags a regression when its exact two-sided p-value is below
its level and more pairs were lost than gained. docs/statistics.md, "What the gate can see".
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["minimum_detectable_drop", "regression_power"]

POWER = 0.8
"""The probability at which a drop counts as detectable."""


def _critical_lost(discordant: np.ndarray, level: float) -> np.ndarray:
    """Per discordant count d, the fewest lost pairs whose exact McNemar p-value
    (2 P(X >= lost), X ~ Bin(d, 1/2)) is below `level`; d + 1 where none is."""
    # isf gives the smallest x with P(X > x) <= level / 2, so lost = x + 1 has p <= level
    x = stats.binom.isf(level / 2, discordant, 0.5)
    critical = np.where(np.isnan(x), discordant + 1, x + 1).astype(np.int64)
    # rejection needs strictly below the level and more lost than gained
    tail = 2 * stats.binom.sf(critical - 1, discordant, 0.5)
    critical = np.where(tail >= level, critical + 1, critical)
    return np.maximum(critical, discordant // 2 + 1)


def regression_power(n: int, discordance: float, drop: float, level: float) -> float:
    """The probability that an exact McNemar test at `level` flags a regression on n pairs
    when accuracy truly drops by `drop` and a share `discordance` of pairs differ by noise.

    Args:
        n: pairs compared.
        discordance: share of pairs that differ without any drop (0 for a deterministic model
            whose only changes are real), in [0, 1].
        drop: the true drop in accuracy, in [0, 1].
        level: the test's level (alpha, or alpha divided by the family size).
    """
    if n <= 0:
        return 0.0
    return _power(n, discordance, drop, _critical_lost(np.arange(n + 1), level))


def _power(n: int, discordance: float, drop: float, critical: np.ndarray) -> float:
    """regression_power with the critical lost counts of every discordant count 0..n given
    (they depend on n and the level only, so a search over drops computes them once)."""
    discordant = np.arange(n + 1)
    if drop <= 0.0:  # no drop: the chance of a false alarm
        weights = stats.binom.pmf(discordant, n, discordance)
        return float(np.sum(weights * stats.binom.sf(critical - 1, discordant, 0.5)))
    psi = min(1.0, max(discordance, drop))
    weights = stats.binom.pmf(discordant, n, psi)
    lost_share = min(1.0, (psi + drop) / (2 * psi))
    flagged = stats.binom.sf(critical - 1, discordant, lost_share)
    return float(np.sum(weights * flagged))


def minimum_detectable_drop(
    n: int, discordant: int, alpha: float, family: int = 1, power: float = POWER
) -> float | None:
    """The smallest true drop in accuracy (0 to 1) that a comparison of n pairs, `discordant`
    of them differing, would flag as a regression with probability `power`, its test at
    alpha / family (Holm's first step: the level a lone drop in a family must pass). None when
    no drop, however large, would be flagged that often (too few pairs).

    Args:
        n: pairs compared.
        discordant: pairs that differ (lost + gained), 0 <= discordant <= n.
        alpha: the comparison's family-wise error rate.
        family: groups tested together (those with a discordant pair), at least 1.
        power: the probability of flagging (80% by default).
    """
    if n < 0 or not 0 <= discordant <= n:
        raise ValueError(f"need 0 <= discordant <= n, got discordant={discordant}, n={n}")
    if not 0.0 < alpha < 1.0 or family < 1:
        raise ValueError(f"need 0 < alpha < 1 and family >= 1, got {alpha}, {family}")
    if n == 0:
        return None
    discordance = discordant / n
    critical = _critical_lost(np.arange(n + 1), alpha / family)
    if _power(n, discordance, 1.0, critical) < power:
        return None
    low, high = 0.0, 1.0  # power(low) < power <= power(high); power rises with the drop
    for _ in range(30):
        middle = (low + high) / 2
        if _power(n, discordance, middle, critical) >= power:
            high = middle
        else:
            low = middle
    return high
