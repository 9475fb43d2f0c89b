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
    return (max(0.0, centre - half), min(1.0, centre + half))


def chance_adjusted(accuracy: float | None, chance: float) -> float | None:
    """Accuracy rescaled so that guessing scores 0 and a perfect score stays 1:
    (accuracy - chance) / (1 - chance). None when undefined (no accuracy, or chance = 1)."""
    if accuracy is None or chance >= 1.0:
        return None
    return (accuracy - chance) / (1.0 - chance)
