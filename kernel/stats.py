"""Statistics of a result: pure functions, empty input handled explicitly."""

from __future__ import annotations

import math

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
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # At p = 0 and p = 1 the bound on that side is exactly 0 or 1; floating point would
    # give 1e-17 or 0.9999999999999999 and leave the estimate outside its own interval.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def chance_adjusted(accuracy: float | None, chance: float) -> float | None:
    """Accuracy rescaled so that guessing scores 0 and a perfect score stays 1:
    (accuracy - chance) / (1 - chance). None when undefined (no accuracy, or chance = 1)."""
    if accuracy is None or chance >= 1.0:
        return None
    return (accuracy - chance) / (1.0 - chance)
