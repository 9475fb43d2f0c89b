"""Accuracy that means the same under every sampling design. Pure functions.

A grid point's accuracy is a ratio over its scored answers; with `samples: k` a case gives k
answers that are not independent, so the point's standard error treats the case as the unit
(a cluster-robust, "CR0", variance). A summary over several points (a manifold, or `*`) is
the mean of the points' accuracies, each point weighing the same whatever number of cases a
fixed count or an adaptive rule gave it, with the variance of that mean: the points are
strata, sampled independently.

Every interval is a Wilson score interval with an effective sample size (Korn & Graubard
1998): the estimate's variance turned into the number of independent answers that would give
it, p(1 - p) / variance, capped at the answers actually scored. The cap keeps an interval
from claiming more precision than its answers would give as one simple random sample (it
never binds with one sample per case at a single point, and with equal counts per point the
summary interval is exactly the Wilson interval of the pooled counts, as before). Wilson
rather than Wald keeps the interval inside [0, 1] and honest near 0 and 1, where a
Wald interval collapses. docs/statistics.md, "How summaries weigh grid points".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from numerate.kernel.stats import Z_95, wilson_bounds

__all__ = ["Estimate", "binomial", "case_clustered", "design_interval", "point_mean"]


@dataclass(frozen=True)
class Estimate:
    """An accuracy with its standard error and 95% interval; `value` is None with nothing
    scored (then the interval is (0, 1) and the standard error None)."""

    value: float | None
    se: float | None
    low: float
    high: float
    scored: int
    """Answers behind the estimate (the cap on its effective sample size)."""


NOTHING = Estimate(None, None, 0.0, 1.0, 0)


def design_interval(
    estimate: float, variance: float, scored: int, z: float = Z_95
) -> tuple[float, float]:
    """The Wilson interval of `estimate` at its effective sample size p(1 - p) / variance,
    at most `scored` (and exactly `scored` where the variance says nothing: 0, or an estimate
    of 0 or 1)."""
    if scored <= 0:
        return (0.0, 1.0)
    effective = float(scored)
    if variance > 0.0 and 0.0 < estimate < 1.0:
        effective = min(effective, estimate * (1.0 - estimate) / variance)
    return wilson_bounds(estimate, effective, z)


def case_clustered(cases: Iterable[tuple[int, int, int]], z: float = Z_95) -> Estimate:
    """A grid point's accuracy from its cases, each with its correct and scored answers over
    its samples: the ratio of all correct to all scored answers, with a standard error that
    treats the case as the unit. With one sample per case it is the binomial p(1 - p) / n and
    the interval the plain Wilson interval.

    Args:
        cases: (correct answers, scored answers, how many cases had them): cases alike are
            given once, with their number (a point's million cases are a few such rows);
            cases with nothing scored add nothing.
    """
    kinds = list(cases)
    if any(not 0 <= c <= s or w < 0 for c, s, w in kinds):
        raise ValueError("need 0 <= correct <= scored for every case, and a count >= 0")
    scored = sum(s * w for _, s, w in kinds)
    if scored == 0:
        return NOTHING
    correct = sum(c * w for c, _, w in kinds)
    p = correct / scored
    variance = sum(w * (c - p * s) ** 2 for c, s, w in kinds) / (scored * scored)
    low, high = design_interval(p, variance, scored, z)
    return Estimate(p, math.sqrt(variance), low, high, scored)


def point_mean(points: Sequence[Estimate], z: float = Z_95) -> Estimate:
    """The mean of the points' accuracies, each point weighing the same, with the standard
    error of that mean (points are independent strata: variance sum(se_i^2) / K^2). Points
    with nothing scored are left out of the mean (they have no accuracy).
    """
    scored = [p for p in points if p.value is not None and p.se is not None]
    if not scored:
        return NOTHING
    k = len(scored)
    mean = min(1.0, max(0.0, sum(p.value for p in scored if p.value is not None) / k))
    variance = sum((p.se or 0.0) ** 2 for p in scored) / (k * k)
    answers = sum(p.scored for p in scored)
    low, high = design_interval(mean, variance, answers, z)
    return Estimate(mean, math.sqrt(variance), low, high, answers)


def binomial(correct: int, n: int, z: float = Z_95) -> Estimate:
    """A proportion of n independent answers: correct / n, its binomial standard error and
    Wilson interval (case_clustered with one answer per case)."""
    if n < 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n, got correct={correct}, n={n}")
    if n == 0:
        return NOTHING
    p = correct / n
    low, high = design_interval(p, p * (1 - p) / n, n, z)
    return Estimate(p, math.sqrt(p * (1 - p) / n), low, high, n)
