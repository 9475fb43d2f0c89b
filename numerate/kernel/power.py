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

import functools
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["minimum_detectable_drop", "regression_power"]


def _stats() -> Any:
    """scipy.stats, imported where a power is worked out, not where this module is: its 0.5-0.7 s
    were paid by every command that imports the comparison (`numerate run` among them),
    whether it compared runs or not."""
    from scipy import stats

    return stats


POWER = 0.8
"""The probability at which a drop counts as detectable."""


def _critical_lost(discordant: np.ndarray, level: float) -> np.ndarray:
    """Per discordant count d, the fewest lost pairs whose exact McNemar p-value
    (2 P(X >= lost), X ~ Bin(d, 1/2)) is below `level`; d + 1 where none is."""
    # isf gives the smallest x with P(X > x) <= level / 2, so lost = x + 1 has p <= level
    x = _stats().binom.isf(level / 2, discordant, 0.5)
    critical = np.where(np.isnan(x), discordant + 1, x + 1).astype(np.int64)
    # rejection needs strictly below the level and more lost than gained
    tail = 2 * _stats().binom.sf(critical - 1, discordant, 0.5)
    critical = np.where(tail >= level, critical + 1, critical)
    return np.maximum(critical, discordant // 2 + 1)


class _Critical:
    """_critical_lost of the discordant counts at one level, worked out only for the counts
    asked for (`table[start:stop]`) and kept: a power sum reads those near its mean, a few
    thousand of a comparison's 200,000 (working out every count took 0.75 s of a large run's
    tiers). The values do not depend on n, so one table per level serves every comparison
    (the groups of one comparison share their level)."""

    def __init__(self, level: float) -> None:
        self.level = level
        self.values = np.full(1025, -1, dtype=np.int64)  # -1: not worked out yet
        self.lock = threading.Lock()  # the tiers test their scopes on two threads

    def __getitem__(self, counts: slice) -> np.ndarray:
        start, stop = counts.start or 0, counts.stop
        with self.lock:
            if stop > len(self.values):
                grown = np.full(max(stop, 2 * len(self.values)), -1, dtype=np.int64)
                grown[: len(self.values)] = self.values
                self.values = grown
            part = self.values[start:stop]  # a view: what is worked out stays
            unknown = part < 0
            if unknown.any():
                part[unknown] = _critical_lost(np.arange(start, stop)[unknown], self.level)
            return part.copy()


_critical_tables: dict[float, _Critical] = {}


def _critical_table(level: float) -> _Critical:
    """The critical lost counts at `level` (see _Critical)."""
    table = _critical_tables.get(level)
    if table is None:
        if len(_critical_tables) > 64:
            _critical_tables.clear()
        table = _critical_tables[level] = _Critical(level)
    return table


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


def _likely(n: int, p: float) -> slice:
    """The discordant counts that carry all but a negligible share (about 1e-11) of Bin(n, p):
    7 standard deviations either side of the mean, and 40 more for a small mean's long right
    tail. Sums over them equal sums over 0..n to 1e-11, far below what moves a drop by the
    search's TOLERANCE, at a fraction of the cost for large n (17,000 pairs: about 900 terms
    instead of 17,001; 10 standard deviations cost 0.4 s more of a large run's tiers)."""
    mean, spread = n * p, 7.0 * math.sqrt(n * p * (1.0 - p))
    return slice(max(0, math.floor(mean - spread) - 40), min(n, math.ceil(mean + spread) + 40) + 1)


def _power(n: int, discordance: float, drop: float, critical: np.ndarray | _Critical) -> float:
    """regression_power with the critical lost counts of every discordant count 0..n given
    (they depend on the level only, so a search over drops computes them once)."""
    psi = discordance if drop <= 0.0 else min(1.0, max(discordance, drop))
    likely = _likely(n, psi)
    discordant = np.arange(n + 1)[likely]
    weights = _stats().binom.pmf(discordant, n, psi)
    if drop <= 0.0:  # no drop: the chance of a false alarm
        return float(np.sum(weights * _stats().binom.sf(critical[likely] - 1, discordant, 0.5)))
    lost_share = min(1.0, (psi + drop) / (2 * psi))
    flagged = _stats().binom.sf(critical[likely] - 1, discordant, lost_share)
    return float(np.sum(weights * flagged))


@functools.lru_cache(maxsize=4096)  # pure: a comparison shown again costs nothing
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
    critical = _critical_table(alpha / family)
    if _power(n, discordance, 1.0, critical) < power:
        return None

    def excess(drop: float) -> float:
        return _power(n, discordance, drop, critical) - power

    return _smallest(excess, *_bracket(excess, _first_guess(n, discordance, alpha / family, power)))


def _first_guess(n: int, discordance: float, level: float, power: float) -> float:
    """The normal approximation of the answer: a drop moves about n * drop / 2 pairs from
    gained to lost, against a spread of sqrt(n * psi) / 2."""
    z = float(_stats().norm.isf(level / 2) + _stats().norm.isf(1 - power))
    guess = z / math.sqrt(n)  # psi = drop
    if guess < discordance:
        guess = z * math.sqrt(discordance / n)
    return min(max(guess, 1e-6), 1.0)


def _bracket(excess: Callable[[float], float], guess: float) -> tuple[float, ...]:
    """An interval around `guess` where `excess` changes sign (low, high and its values there),
    widened until it does; [0, 1] at most."""
    width = 0.1 * guess + 1e-4
    low, high = max(0.0, guess - width), min(1.0, guess + width)
    at_low, at_high = excess(low), excess(high)
    while at_low >= 0 and low > 0:
        width *= 4
        low, high, at_high = max(0.0, low - width), low, at_low
        at_low = excess(low)
    while at_high < 0 and high < 1:
        width *= 4
        low, high, at_low = high, min(1.0, high + width), at_high
        at_high = excess(high)
    return low, high, at_low, at_high


TOLERANCE = 1e-9
"""How close minimum_detectable_drop comes to the exact smallest drop (30 halvings of [0, 1])."""


def _smallest(
    excess: Callable[[float], float], low: float, high: float, at_low: float, at_high: float
) -> float:
    """The smallest x in [low, high] with excess(x) >= 0, to within TOLERANCE (excess rises
    with x, excess(low) < 0 <= excess(high)): regula falsi with the Illinois rule, which keeps
    the root bracketed and needs a few evaluations where halving needs 30. A step that lands
    within TOLERANCE of an end is moved TOLERANCE past it, so that the bracket closes on the
    root; a bracket a rounding error wider than TOLERANCE is closed too (its only step landed
    on its lower end: on 66,700 pairs the search went on evaluating that one drop until its
    100th step, 1 s of a `report --tiers`)."""
    if at_low >= 0:
        return low
    kept = 0
    for _ in range(100):
        if high - low <= TOLERANCE:
            break
        x = high - at_high * (high - low) / (at_high - at_low)
        x = min(max(x, low + TOLERANCE), high - TOLERANCE)
        if not low < x < high:
            break
        at_x = excess(x)
        if at_x >= 0:
            high, at_high = x, at_x
            at_low, kept = (at_low / 2 if kept == 1 else at_low), 1
        else:
            low, at_low = x, at_x
            at_high, kept = (at_high / 2 if kept == -1 else at_high), -1
    return high
