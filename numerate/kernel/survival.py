"""Kaplan-Meier survival curves: the share of cases still without an answer as tokens grow,
a truncated answer censored at its token count. Pure: numbers in, numbers out.

The variance is Greenwood's; the 95% interval of each point is the log-log one (it stays
within 0..1); the median's interval is where those bands cross one half (the band method:
the lower limit where the lower band falls to 0.5 or below, the upper limit where the upper
band does; None when it never does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerate.kernel.stats import Z_95


@dataclass(frozen=True)
class SurvivalCurve:
    """A Kaplan-Meier curve: at each time an event happened, the number at risk just before,
    the events then, the survival just after, its Greenwood standard error and 95% band."""

    times: tuple[float, ...]
    at_risk: tuple[int, ...]
    events: tuple[int, ...]
    survival: tuple[float, ...]
    se: tuple[float | None, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    n: int
    censored: int

    def _first_at_or_below(self, values: Sequence[float]) -> float | None:
        return next((t for t, s in zip(self.times, values, strict=True) if s <= 0.5), None)

    @property
    def median(self) -> float | None:
        """The first time the survival is 0.5 or below (None: it never falls that far)."""
        return self._first_at_or_below(self.survival)

    @property
    def median_interval(self) -> tuple[float | None, float | None]:
        """The median's 95% interval from the band: from the first time the lower band is 0.5
        or below to the first time the upper band is (None: a limit the data cannot place)."""
        return self._first_at_or_below(self.low), self._first_at_or_below(self.high)


def kaplan_meier(
    times: Sequence[float], observed: Sequence[bool], z: float = Z_95
) -> SurvivalCurve:
    """The Kaplan-Meier estimate of `times` (event or censoring times), `observed[i]` true
    when subject i's event was seen (false: censored then). At a time with both, the events
    come first (a subject censored at t was at risk at t), as is the convention."""
    if len(times) != len(observed):
        raise ValueError(f"{len(times)} times but {len(observed)} event flags")
    if any(not math.isfinite(t) or t < 0 for t in times):
        raise ValueError("times must be finite and 0 or more")
    time = np.asarray(times, dtype=float)
    seen = np.asarray(observed, dtype=bool)
    order = np.argsort(time, kind="stable")
    time, seen = time[order], seen[order]
    distinct, first, together = np.unique(time, return_index=True, return_counts=True)
    ended = np.add.reduceat(seen.astype(np.int64), first) if len(time) else np.zeros(0, int)
    at_risk = len(time) - np.concatenate(([0], np.cumsum(together)))[:-1].astype(np.int64)
    events = ended > 0
    t, n, d = distinct[events], at_risk[events], ended[events]
    survival = np.cumprod(1 - d / n)
    with np.errstate(divide="ignore"):  # all at risk ended (n = d): the variance is infinite
        greenwood = np.cumsum(np.where(n > d, d / np.maximum(n * (n - d), 1), np.inf))
    bands = [_log_log_band(float(s), float(g), z) for s, g in zip(survival, greenwood, strict=True)]
    return SurvivalCurve(
        tuple(t.tolist()), tuple(n.tolist()), tuple(d.tolist()), tuple(survival.tolist()),
        tuple(float(s * math.sqrt(g)) if math.isfinite(g) else None
              for s, g in zip(survival, greenwood, strict=True)),
        tuple(low for low, _ in bands), tuple(high for _, high in bands),
        len(time), int(len(time) - seen.sum()),
    )  # fmt: skip


def _log_log_band(survival: float, greenwood: float, z: float) -> tuple[float, float]:
    """The log-log 95% interval of a survival estimate (0 and 1 at the ends it cannot leave).
    Where the band is not defined (a survival of 0, or an infinite variance: every case at
    risk ended), it is the whole of 0..1: the data place no limit there (a band of (0, 0)
    at a survival of 0 gave a median's upper limit the data did not: `kaplan_meier([10],
    [True])`'s median interval was (10, 10))."""
    if survival <= 0 or not math.isfinite(greenwood):
        return 0.0, 1.0
    if survival >= 1:
        return 1.0, 1.0
    log_s = math.log(survival)
    spread = z * math.sqrt(greenwood) / abs(log_s)
    return survival ** math.exp(spread), survival ** math.exp(-spread)
