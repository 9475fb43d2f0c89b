"""Statistics of a result: pure functions, empty input handled explicitly."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_95 = 1.959963984540054
"""Two-sided 95% quantile of the standard normal distribution."""


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Args:
        successes: number of successes, 0 <= successes <= n.
        n: number of trials; with n = 0 nothing is known and the interval is (0, 1).
        z: normal quantile (95% by default).
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    return wilson_bounds(successes / n, n, z)


def wilson_bounds(p: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of an estimate `p` worth `n` trials; `n` may be an effective
    sample size (a design's answers divided by its design effect), so it need not be whole.

    Args:
        p: the estimate, 0 <= p <= 1.
        n: trials, or effective trials; with n <= 0 nothing is known and the interval is (0, 1).
        z: normal quantile (95% by default).
    """
    if not 0.0 <= p <= 1.0:  # also refuses NaN
        raise ValueError(f"need 0 <= p <= 1, got p={p}")
    if n <= 0:
        return (0.0, 1.0)
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # At p = 0 and p = 1 the bound on that side is exactly 0 or 1; floating point would
    # give 1e-17 or 0.9999999999999999 and leave the estimate outside its own interval.
    low = 0.0 if p == 0.0 else max(0.0, min(p, centre - half))
    high = 1.0 if p == 1.0 else min(1.0, max(p, centre + half))
    return (low, high)


def chance_adjusted(accuracy: float | None, chance: float) -> float | None:
    """Accuracy rescaled so that guessing scores 0 and a perfect score stays 1:
    (accuracy - chance) / (1 - chance). None when undefined (no accuracy, or chance = 1)."""
    if accuracy is None or chance >= 1.0:
        return None
    return (accuracy - chance) / (1.0 - chance)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs with p = 1/2.

    Twice the smaller tail, capped at 1 (the test is symmetric, so this is also the
    "as likely or less likely" two-sided p-value). Computed in log space from the tail's
    largest term down, so that a million discordant pairs cost milliseconds.

    Args:
        b: pairs the first condition got right and the second wrong.
        c: pairs the first condition got wrong and the second right. With b + c = 0 nothing
            disagrees and the p-value is 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"need b >= 0 and c >= 0, got b={b}, c={c}")
    n, k = b + c, min(b, c)
    if n == 0 or 2 * k == n:
        return 1.0
    # log P(X = k) for X ~ Binomial(n, 1/2), then P(X <= k) / P(X = k) by the ratio of terms
    log_top = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)
    ratio_sum, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)
        ratio_sum += term
        if term < 1e-17 * ratio_sum:
            break
    return min(1.0, 2.0 * math.exp(log_top + math.log(ratio_sum)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given.

    The i-th smallest of m p-values is multiplied by m - i + 1, made non-decreasing along
    that order and capped at 1; rejecting where the adjusted value is below alpha controls
    the family-wise error rate at alpha under any dependence between the tests.

    Args:
        p_values: raw p-values, each in [0, 1]; an empty sequence gives an empty list.
    """
    for p in p_values:
        if not 0.0 <= p <= 1.0:  # also refuses NaN
            raise ValueError(f"p-values must lie in [0, 1], got {p}")
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_difference_interval(b: int, c: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Confidence interval for p_new - p_base, the difference of two paired proportions.

    Bonett & Price's adjusted Wald interval (J. Educ. Behav. Stat. 37, 2012): one success
    is added to each discordant cell and two pairs to n, which keeps the Wald interval's
    simplicity and repairs its coverage for small n and for differences near 0 or ±1. It
    needs only the discordant counts, not how the concordant pairs split. Clamped to [-1, 1].

    Args:
        b: pairs the base got right and the new one wrong.
        c: pairs the base got wrong and the new one right.
        n: all pairs, b + c <= n; with n = 0 nothing is known and the interval is (-1, 1).
        z: normal quantile (95% by default).
    """
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need b, c >= 0 and b + c <= n, got b={b}, c={c}, n={n}")
    return paired_difference_bounds(b, c, n, z)


def paired_difference_bounds(b: float, c: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """paired_difference_interval for counts that need not be whole: a stratified design's
    effective counts (its discordant shares times its effective number of pairs)."""
    if n <= 0:
        return (-1.0, 1.0)
    lost, gained = (b + 1) / (n + 2), (c + 1) / (n + 2)
    centre = gained - lost
    half = z * math.sqrt(max(0.0, lost + gained - centre * centre) / (n + 2))
    return (max(-1.0, centre - half), min(1.0, centre + half))


def holm_over_discordant(p_values: Sequence[float], discordant: Sequence[int]) -> list[float]:
    """Holm's adjustment over the tests that can reject: a McNemar test of a group without a
    discordant pair has p = 1 whatever happens (it conditions on the discordant count), so
    such groups stay at 1 and do not enlarge the family. Family-wise error stays at alpha.

    Args:
        p_values: each group's raw p-value.
        discordant: each group's discordant pairs (lost + gained).
    """
    if len(p_values) != len(discordant):
        raise ValueError("need one discordant count per p-value")
    tested = [i for i, d in enumerate(discordant) if d > 0]
    adjusted = [1.0] * len(p_values)
    for i, value in zip(tested, holm([p_values[i] for i in tested]), strict=True):
        adjusted[i] = value
    return adjusted
