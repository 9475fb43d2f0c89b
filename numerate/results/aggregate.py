"""Aggregation of graded responses into per-point and summary statistics. Pure: the answers
are reduced in SQL where they are (per point, its counts and how many of its cases were alike:
numerate.store.reductions), the figures computed in polars and numerate.kernel from what that
leaves, so a run of a million answers aggregates in the memory of its points, with one answer
a case or several.

Definitions (docs/schema.md, "Results in DuckDB" and "How summaries weigh grid points"):
- n: answers; n_scored = n - error (a transport error says nothing about the model).
- A point's accuracy = correct / n_scored, with its 95% Wilson interval; with `samples: k`
  the interval and the standard error `se` treat the case as the unit (numerate.kernel.design).
  Unparsed and truncated responses count as not correct.
- A summary (per manifold, and `*` per model over every manifold) is the mean over its grid
  points with a scored answer, each point weighing the same whatever its count (fixed,
  adaptive): accuracy, its interval and `se`, the chance floors, truncation and unparsed
  rates and the multi-sample figures; `points` says how many. Counts (n, correct, ...),
  error_rate, tokens and latency stay totals and means over answers: they describe what the
  run spent, not the model's accuracy.
- chance: the floor no reasoning is needed to reach, per case the stronger of a uniform guess
  (chance_random) and the manifold's trivial strategy (chance_heuristic); means over the
  scored cases; chance_adjusted = (accuracy - chance) / (1 - chance).
- samples: answers per case (k); with k > 1, pass_at_k (Chen et al.'s unbiased estimator),
  maj_at_k (majority vote over the answers read) and consistency (share of cases whose
  answers all agree), means over cases (numerate.kernel.samples defines them; each case's
  vote and agreement are read where its answers are: numerate.store.reductions); null with
  k = 1.
- summaries carry their case set: a hash of the case ids they cover (with the generator
  version in each id) and the manifolds; figures are comparable only within one case set.
- truncation_rate, unparsed_rate over n_scored; error_rate over n.
- completion tokens and latency over the responses that have them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import polars as pl

from numerate.kernel.design import Estimate, case_clustered, point_mean
from numerate.kernel.samples import pass_at_k
from numerate.kernel.stats import chance_adjusted
from numerate.store import reductions
from numerate.store.queries import POOLED, Source
from numerate.store.reductions import CASE_KINDS, FLOORS, POINT_KEYS, Reduced

if TYPE_CHECKING:
    from numerate.results.standing import Standing

MULTI_SAMPLE = ["pass_at_k", "maj_at_k", "consistency"]
POINT_MEANS = [*FLOORS, "truncation_rate", "unparsed_rate", *MULTI_SAMPLE]
"""What a summary averages over its points (besides accuracy)."""


def _with_rates(frame: pl.DataFrame) -> pl.DataFrame:
    frame = frame.with_columns(
        n=pl.col("n").cast(pl.Int32),
        n_scored=(pl.col("n") - pl.col("error")).cast(pl.Int32),
    )
    scored = pl.col("n_scored")
    return frame.with_columns(
        truncation_rate=pl.when(scored > 0).then(pl.col("truncated") / scored),
        unparsed_rate=pl.when(scored > 0).then(pl.col("unparsed") / scored),
        error_rate=pl.col("error") / pl.col("n"),
    )


def _estimate_columns(estimates: Sequence[Estimate], chance: pl.Series) -> dict[str, pl.Series]:
    return {
        "accuracy": pl.Series([e.value for e in estimates], dtype=pl.Float64),
        "se": pl.Series([e.se for e in estimates], dtype=pl.Float64),
        "ci_low": pl.Series([e.low for e in estimates], dtype=pl.Float64),
        "ci_high": pl.Series([e.high for e in estimates], dtype=pl.Float64),
        "chance_adjusted": pl.Series(
            [chance_adjusted(e.value, c) for e, c in zip(estimates, chance, strict=True)],
            dtype=pl.Float64,
        ),
    }


def _case_figures(row: dict[str, Any]) -> dict[str, Any]:
    """A point's estimate and multi-sample figures from its kinds of case (numerate.store.
    reductions.CASE_KINDS: lists, an entry per kind, with `cases`, how many were so)."""
    kinds = list(zip(
        row["case_correct"], row["case_scored"], row["cases"], row["case_majority"],
        row["case_agrees"], strict=True,
    ))  # fmt: skip
    estimate = case_clustered((c, s, w) for c, s, w, _, _ in kinds)
    samples = max(row["case_answers"], default=1)
    figures: dict[str, Any] = {"estimate": estimate, "samples": samples}
    if samples > 1:
        scored = [(c, s, w, m, a) for c, s, w, m, a in kinds if s > 0]
        if scored:
            cases = sum(w for _, _, w, _, _ in scored)
            figures["pass_at_k"] = sum(
                w * pass_at_k(s, c, min(samples, s)) for c, s, w, _, _ in scored
            ) / cases  # fmt: skip
            figures["maj_at_k"] = sum(w * m for _, _, w, m, _ in scored) / cases
        several = [(w, a) for _, s, w, _, a in scored if s > 1]
        if several:
            figures["consistency"] = sum(w for w, a in several if a) / sum(w for w, _ in several)
    return figures


def aggregate_reduced(reduced: Reduced) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-point aggregates and summaries (per manifold, and per model over all manifolds)
    from a run's answers reduced where they are (numerate.store.reductions): each point's
    figures from its counts and kinds of case, each summary's from its points and totals."""
    points, estimates = _points(reduced.counts, reduced.kinds)
    summaries = pl.concat(
        [
            _summaries(reduced.manifold, points, estimates,
                       ["run_id", "model", "manifold"]).with_columns(level=pl.lit("manifold")),
            _summaries(reduced.model, points, estimates, ["run_id", "model"])
            .with_columns(level=pl.lit("model"), manifold=pl.lit(POOLED)),
        ],
        how="diagonal",
    )  # fmt: skip
    return points, summaries.sort(["level", "run_id", "model", "manifold"])


def _points(counts: pl.DataFrame, kinds: pl.DataFrame) -> tuple[pl.DataFrame, list[Estimate]]:
    """Each point's figures: its counts, and those its kinds of case give."""
    per_point = kinds.group_by(POINT_KEYS).agg(*CASE_KINDS, "cases")
    points = _with_rates(counts.join(per_point, on=POINT_KEYS)).sort(POINT_KEYS)
    figures = [_case_figures(row) for row in points.iter_rows(named=True)]
    estimates = [f["estimate"] for f in figures]
    return points.drop(*CASE_KINDS, "cases").with_columns(
        **_estimate_columns(estimates, points["chance"]),
        samples=pl.Series([f["samples"] for f in figures], dtype=pl.Int32),
        **{c: pl.Series([f.get(c) for f in figures], dtype=pl.Float64) for c in MULTI_SAMPLE},
    ), estimates


def _summaries(
    totals: pl.DataFrame, points: pl.DataFrame, estimates: Sequence[Estimate], keys: list[str]
) -> pl.DataFrame:
    """Per group of points: totals over answers, and the mean over points of the rest."""
    totals = _with_rates(totals).drop("truncation_rate", "unparsed_rate")
    indexed = points.with_row_index("point").with_columns(has_scored=pl.col("n_scored") > 0)
    means = indexed.group_by(keys).agg(
        points=pl.col("has_scored").sum().cast(pl.Int32),
        point_indices=pl.col("point"),
        # over the points with a scored answer; the floors over all when none has one
        **{c: pl.coalesce(pl.col(c).filter("has_scored").mean(), pl.col(c).mean())
           if c in FLOORS else pl.col(c).filter("has_scored").mean() for c in POINT_MEANS},
        samples=pl.col("samples").max(),
    )  # fmt: skip
    frame = totals.join(means, on=keys)
    group_estimates = [point_mean([estimates[i] for i in rows]) for rows in frame["point_indices"]]
    return frame.drop("point_indices").with_columns(
        **_estimate_columns(group_estimates, frame["chance"])
    )


def aggregate(responses: pl.DataFrame, cases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`aggregate_reduced` over answers in memory.

    Args:
        responses: one row per graded response: run_id, model, manifold, case_id, point_key,
            outcome, completion_tokens, latency_s, and answer (the answer as read, for the
            multi-sample figures; null or absent when none).
        cases: case_id, params (JSON text), chance, chance_random, chance_heuristic (null
            for cases stored before heuristics existed).

    Raises:
        ValueError: a response whose case is not in `cases`.
    """
    return aggregate_reduced(reductions.of_frames(responses, cases))


def aggregate_run(source: Source, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`aggregate_reduced` of a stored run's answers (reduced in its database); the summaries'
    score and tier null (a running run's figures: see `scored_run`)."""
    points, summaries = aggregate_reduced(reductions.of_run(source, run_id))
    return points, with_standing(summaries, None)


def scored_run(
    source: Source, run_id: str,
    held: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> tuple[pl.DataFrame, pl.DataFrame]:  # fmt: skip
    """What a run stores as it ends: `aggregate_run`, the summaries with each model's score
    and tier (numerate.results.standing: per model over every manifold, its score, interval
    and tier; per manifold, the manifold's score and tier). Its queries run inside `held()`
    (a writer's hold of the file: one for all), the figures after it, so that the bootstrap
    and the exact tests never keep other writers and readers waiting. Not computed for a
    running run's live figures: they would weigh on every read of them."""
    from numerate.results.standing import ranked, read  # numpy's bootstrap, scipy's tests

    with held():
        reduced = reductions.of_run(source, run_id)
        found = read(source, run_id, (reduced.counts, reduced.kinds))
    points, summaries = aggregate_reduced(reduced)
    return points, with_standing(summaries, ranked(found))


def with_standing(summaries: pl.DataFrame, found: Standing | None) -> pl.DataFrame:
    """The summaries with score, score_low, score_high and tier (null where none, and
    everywhere without a standing)."""
    summaries = summaries.drop([c for c in _STANDING if c in summaries.columns])
    if found is None:
        return summaries.with_columns(
            pl.lit(None, pl.Float64).alias("score"), pl.lit(None, pl.Float64).alias("score_low"),
            pl.lit(None, pl.Float64).alias("score_high"), pl.lit(None, pl.Int32).alias("tier"),
        )  # fmt: skip
    overall = found.scores.select(
        "model", pl.lit(POOLED).alias("manifold"), "score",
        pl.col("ci_low").alias("score_low"), pl.col("ci_high").alias("score_high"),
    )  # fmt: skip
    manifolds = [c for c in found.scores.columns if c not in _SCORE_COLUMNS]
    per_manifold = found.scores.select("model", *manifolds).unpivot(
        manifolds, index="model", variable_name="manifold", value_name="score"
    )
    scores = pl.concat([overall, per_manifold], how="diagonal_relaxed")
    tiers = found.tiers.select("model", pl.col("scope").alias("manifold"), "tier")
    return (
        summaries.join(scores, on=["model", "manifold"], how="left")
        .join(tiers, on=["model", "manifold"], how="left")
        .with_columns(
            pl.col("score_low", "score_high").cast(pl.Float64), pl.col("tier").cast(pl.Int32)
        )
    )


_SCORE_COLUMNS = ("model", "score", "ci_low", "ci_high", "points", "tier")
_STANDING = ("score", "score_low", "score_high", "tier")
