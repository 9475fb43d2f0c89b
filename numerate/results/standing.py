"""Where each model of a run stands: one score with its interval (numerate.kernel.composite),
and tiers drawn from paired tests (docs/statistics.md, "One score" and "Tiers").

Tiers: the models that answered the same cases are compared in pairs with numerate's paired
comparison (numerate.results.compare: per-point means, the exact McNemar test on effective
counts, Holm's adjustment over the family of pairs, the detectable difference). A scope (a
manifold, or `*` for every point of every manifold) is one family. Its models are ordered by
accuracy (the mean over points, as every summary); the first opens tier 1, and each next model
joins the open tier unless it differs from one of its members, when it opens the next. So no
two models of a tier differ; a model may still be indistinguishable from one of the tier above
(the pairs table says so), which is why a tier is not a rank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import polars as pl

from numerate.kernel.composite import Composite, PointCases, composite
from numerate.results.compare import compare_groups
from numerate.store import queries, reductions
from numerate.store.queries import POOLED, Source

ALPHA = 0.05


@dataclass(frozen=True)
class Standing:
    """A run's scores (model, score, ci_low, ci_high, points, tier, and each manifold's
    score), its tiers (scope, tier, model, accuracy) and the pairs behind them (scope,
    base_model, new_model, n, difference new - base with its interval, p_holm,
    detectable_difference, differ)."""

    scores: pl.DataFrame
    tiers: pl.DataFrame
    pairs: pl.DataFrame


def tiers(order: Sequence[str], differ: Callable[[str, str], bool]) -> dict[str, int]:
    """Each model's tier: `order` from the best; a model joins the open tier unless it differs
    from one of its members (then it opens the next)."""
    tier, members, placed = 0, list[str](), {}
    for model in order:
        if not members or any(differ(model, other) for other in members):
            tier, members = tier + 1, []
        members.append(model)
        placed[model] = tier
    return placed


def _differ(pairs: set[frozenset[str]]) -> Callable[[str, str], bool]:
    def differ(a: str, b: str) -> bool:
        return frozenset((a, b)) in pairs

    return differ


def point_cases(counts: pl.DataFrame, kinds: pl.DataFrame) -> dict[str, list[PointCases]]:
    """Each model's points with a scored answer, their cases grouped by their correct,
    truncated and scored answers, from a run's reduction (numerate.store.reductions: `kinds`,
    and the floor `chance` of `counts`, the mean over the scored answers)."""
    keys = ["model", "manifold", "point_key"]
    kind = ["case_correct", "case_truncated", "case_scored"]
    grouped = (
        kinds.filter(pl.col("case_scored") > 0)
        .group_by([*keys, *kind])
        .agg(pl.col("cases").sum())
        .sort([*keys, *kind])
        .group_by(keys, maintain_order=True)
        .agg(*kind, "cases")
        .join(counts.select(*keys, "chance"), on=keys, how="left")
        .sort(keys)
    )
    by_model: dict[str, list[PointCases]] = {}
    for row in grouped.iter_rows(named=True):
        by_model.setdefault(row["model"], []).append(PointCases(
            row["manifold"], row["chance"], row["case_correct"], row["case_truncated"],
            row["case_scored"], row["cases"],
        ))  # fmt: skip
    return by_model


def _score(points: Sequence[PointCases]) -> Composite | None:
    try:
        return composite(points)
    except ValueError:  # every point's chance is 1: nothing to score
        return None


def _accuracy(points: Sequence[PointCases]) -> float:
    """The mean over points of correct / scored."""
    shares = [
        sum(c * k for c, k in zip(p.correct, p.cases, strict=True))
        / sum(s * k for s, k in zip(p.scored, p.cases, strict=True))
        for p in points
    ]
    return sum(shares) / len(shares)


def _pairs(counts: pl.DataFrame, scope: str) -> list[dict[str, Any]]:
    """One family: each pair of models over the points of `scope` (POOLED: all)."""
    if scope != POOLED:
        counts = counts.filter(pl.col("manifold") == scope)
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in counts.iter_rows(named=True):
        point = row | {"n_base_only": 0, "n_new_only": 0}
        groups.setdefault((row["base_model"], row["new_model"]), []).append(point)
    rows = compare_groups(groups, ["base_model", "new_model"], ALPHA)
    return [
        {
            "scope": scope, "base_model": r["base_model"], "new_model": r["new_model"],
            "n": r["n"], "difference": r["difference"], "difference_low": r["difference_low"],
            "difference_high": r["difference_high"], "p_holm": r["p_holm"],
            "detectable_difference": r["detectable_drop"],
            "differ": r["verdict"] in ("regression", "improvement"),
        }
        for r in rows
    ]  # fmt: skip


Read = tuple[dict[str, list[PointCases]], pl.DataFrame]
"""What a standing is computed from: each model's points, and the pairs' counts per point."""


def standing(source: Source, run_id: str) -> Standing:
    """Scores, tiers and pairs of a run's models (empty frames when no answer is scored)."""
    return ranked(read(source, run_id))


def read(
    source: Source, run_id: str, points: tuple[pl.DataFrame, pl.DataFrame] | None = None
) -> Read:
    """What a standing needs: the run's points (`point_cases` of its counts and kinds, as
    numerate.store.reductions.points_of_run reads them, or as given), and with more than one
    model the pairs' counts (no pair to count, no self-join, otherwise)."""
    counts, kinds = points if points is not None else reductions.points_of_run(source, run_id)
    cases = point_cases(counts, kinds)
    return cases, queries.paired_counts(source, run_id) if len(cases) > 1 else pl.DataFrame()


def ranked(found: Read) -> Standing:
    """`rank`, the bootstrap and each scope's exact tests side by side: numpy's draws and
    scipy's sums let go of the GIL (bench/analysis.py: a million answers on 2 cores)."""
    points, counts = found
    with ThreadPoolExecutor(2, thread_name_prefix="standing") as pool:
        scoring = pool.submit(_scores, points)
        return rank(points, counts, scoring.result, pool.map)


def _scores(points: Mapping[str, Sequence[PointCases]]) -> dict[str, Composite | None]:
    return {model: _score(p) for model, p in points.items()}


def rank(
    points: Mapping[str, Sequence[PointCases]],
    counts: pl.DataFrame,
    scores: Callable[[], Mapping[str, Composite | None]] | None = None,
    mapped: Callable[..., Iterable[list[dict[str, Any]]]] = map,
) -> Standing:
    """Scores, tiers and pairs from each model's points and the pairs' counts per point
    (queries.paired_counts: base_model, new_model, manifold, point_key, PAIRED_COUNTS);
    `scores` gives each model's composite once the tiers are drawn (default: computed
    then); `mapped` maps each scope's tests (default: one after the other)."""
    manifolds = sorted({p.manifold for model_points in points.values() for p in model_points})
    scopes = [POOLED, *manifolds]
    tested = mapped(lambda scope: _pairs(counts, scope) if counts.height else [], scopes)
    tier_rows: list[dict[str, Any]] = []
    pair_rows: list[dict[str, Any]] = []
    for scope, pairs in zip(scopes, tested, strict=True):
        pair_rows += pairs
        differ = {frozenset((p["base_model"], p["new_model"])) for p in pairs if p["differ"]}
        accuracy = {
            model: _accuracy([p for p in model_points if scope in (POOLED, p.manifold)])
            for model, model_points in points.items()
            if any(scope in (POOLED, p.manifold) for p in model_points)
        }
        order = sorted(accuracy, key=lambda m: (-accuracy[m], m))
        placed = tiers(order, _differ(differ))
        tier_rows += [
            {"scope": scope, "tier": placed[m], "model": m, "accuracy": accuracy[m]} for m in order
        ]
    overall = {r["model"]: r["tier"] for r in tier_rows if r["scope"] == POOLED}
    scored = scores() if scores is not None else _scores(points)
    score_rows: list[dict[str, Any]] = [
        {"model": model, "score": c.score, "ci_low": c.low, "ci_high": c.high,
         "points": c.points} | c.manifolds if c else {"model": model, "points": 0}
        for model, c in scored.items()
    ]  # fmt: skip
    for row in score_rows:
        row["tier"] = overall[row["model"]]
    score_rows.sort(key=lambda row: (-float(row.get("score") or -1.0), row["model"]))
    return Standing(
        scores=pl.DataFrame(score_rows, schema=_SCORES | {m: pl.Float64 for m in manifolds}),
        tiers=pl.DataFrame(tier_rows, schema=_TIERS),
        pairs=pl.DataFrame(pair_rows, schema=_PAIRS),
    )


_SCORES = {"model": pl.String, "score": pl.Float64, "ci_low": pl.Float64,
           "ci_high": pl.Float64, "points": pl.Int64, "tier": pl.Int64}  # fmt: skip
_TIERS = {"scope": pl.String, "tier": pl.Int64, "model": pl.String, "accuracy": pl.Float64}
_PAIRS = {"scope": pl.String, "base_model": pl.String, "new_model": pl.String, "n": pl.Int64,
          "difference": pl.Float64, "difference_low": pl.Float64, "difference_high": pl.Float64,
          "p_holm": pl.Float64, "detectable_difference": pl.Float64,
          "differ": pl.Boolean}  # fmt: skip
