"""Baselines that need no images: they answer a count for each target directly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from numerate.numgen.metrics import COLUMNS, MAX_COUNT, WEBER_FRACTION, weber_matrix

BASELINES = ("random", "weber")


def random_counts(targets: Sequence[int], seed: int) -> list[int]:
    """A uniform random choice of 1..20 for every target (the reference leaderboard's random
    row: expected accuracy 0.05 and MWE 2.300 over targets 1..10)."""
    rng = np.random.default_rng(seed)
    return [int(g) for g in rng.integers(1, MAX_COUNT + 1, size=len(targets))]


def weber_counts(targets: Sequence[int], seed: int, w: float = WEBER_FRACTION) -> list[int]:
    """A simulated human observer estimating without counting: exact up to 4, then a draw
    from the Weber model (normal, sd = w * target, rounded, truncated to 1..20)."""
    rng = np.random.default_rng(seed)
    design = sorted(set(targets))
    matrix = weber_matrix(design, w)
    rows = {t: matrix[i] for i, t in enumerate(design)}
    return [int(rng.choice(COLUMNS, p=rows[t])) for t in targets]


def baseline_counts(name: str, targets: Sequence[int], seed: int) -> list[int]:
    """The counts of baseline `name` ("random" or "weber")."""
    if name == "random":
        return random_counts(targets, seed)
    if name == "weber":
        return weber_counts(targets, seed)
    raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {name!r}")
