"""Aggregation of graded responses into per-point and summary statistics. Pure polars.

Definitions (README, "Results in DuckDB"):
- n: cases; n_scored = n - error (a transport error says nothing about the model).
- accuracy = correct / n_scored, with its 95% Wilson interval; unparsed and truncated
  responses count as not correct.
- chance: the floor no reasoning is needed to reach, per case the stronger of a uniform guess
  (chance_random) and the manifold's trivial strategy (chance_heuristic); means over the
  scored cases; chance_adjusted = (accuracy - chance) / (1 - chance).
- n counts answers: with `samples: k` a case gives k of them.
- summaries carry their case set: a hash of the case ids they cover (with the generator
  version in each id) and the manifolds; figures are comparable only within one case set.
- truncation_rate, unparsed_rate over n_scored; error_rate over n.
- completion tokens and latency over the responses that have them.
"""

from __future__ import annotations

import hashlib

import polars as pl

from numerate.kernel.stats import chance_adjusted, wilson_interval
from numerate.store.queries import POOLED

OUTCOMES = ("correct", "wrong", "unparsed", "truncated", "error")


def _scored_mean(column: str) -> pl.Expr:
    # over the scored cases, like accuracy; over all when every case errored
    return pl.coalesce(
        pl.col(column).filter(pl.col("outcome") != "error").mean(), pl.col(column).mean()
    ).alias(column)


def _counts(group_by: list[str]) -> list[pl.Expr]:
    return [
        pl.len().alias("n"),
        *[(pl.col("outcome") == o).sum().cast(pl.Int32).alias(o) for o in OUTCOMES],
        *[_scored_mean(c) for c in ("chance", "chance_random", "chance_heuristic")],
        pl.col("completion_tokens").cast(pl.Float64).mean().alias("mean_completion_tokens"),
        pl.col("completion_tokens").cast(pl.Float64).median().alias("median_completion_tokens"),
        pl.col("latency_s").mean().alias("mean_latency_s"),
    ]


def _rates(frame: pl.DataFrame) -> pl.DataFrame:
    frame = frame.with_columns(
        n=pl.col("n").cast(pl.Int32),
        n_scored=(pl.col("n") - pl.col("error")).cast(pl.Int32),
    )
    scored = pl.col("n_scored")
    frame = frame.with_columns(
        accuracy=pl.when(scored > 0).then(pl.col("correct") / scored),
        truncation_rate=pl.when(scored > 0).then(pl.col("truncated") / scored),
        unparsed_rate=pl.when(scored > 0).then(pl.col("unparsed") / scored),
        error_rate=pl.col("error") / pl.col("n"),
    )
    intervals = [
        wilson_interval(c, n) for c, n in zip(frame["correct"], frame["n_scored"], strict=True)
    ]
    adjusted = [
        chance_adjusted(a, c) for a, c in zip(frame["accuracy"], frame["chance"], strict=True)
    ]
    return frame.with_columns(
        ci_low=pl.Series([lo for lo, _ in intervals], dtype=pl.Float64),
        ci_high=pl.Series([hi for _, hi in intervals], dtype=pl.Float64),
        chance_adjusted=pl.Series(adjusted, dtype=pl.Float64),
    )


def aggregate(responses: pl.DataFrame, cases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-point aggregates and summaries (per manifold, and per model over all manifolds).

    Args:
        responses: one row per graded response: run_id, model, manifold, case_id, point_key,
            outcome, completion_tokens, latency_s.
        cases: case_id, params (JSON text), chance, chance_random, chance_heuristic (null
            for cases stored before heuristics existed).
    """
    floors = ["chance", "chance_random", "chance_heuristic"]
    if "chance_random" not in cases.columns:
        cases = cases.with_columns(chance_random=pl.col("chance"))
    if "chance_heuristic" not in cases.columns:
        cases = cases.with_columns(chance_heuristic=pl.lit(None, dtype=pl.Float64))
    joined = responses.join(
        cases.select("case_id", "params", *floors).with_columns(pl.col(floors).cast(pl.Float64)),
        on="case_id",
        how="left",
    )
    if joined["chance"].null_count():
        missing = joined.filter(pl.col("chance").is_null())["case_id"][0]
        raise ValueError(f"response for case {missing!r} has no stored case")
    point_keys = ["run_id", "model", "manifold", "point_key"]
    points = _rates(
        joined.group_by(point_keys).agg(*_counts(point_keys), pl.col("params").first())
    ).sort(point_keys)
    case_set = [
        pl.col("case_id").unique().sort().str.join(",").alias("case_set"),
        pl.col("manifold").unique().sort().str.join(",").alias("manifolds"),
    ]
    by_manifold = joined.group_by(["run_id", "model", "manifold"]).agg(*_counts([]), *case_set)
    by_model = joined.group_by(["run_id", "model"]).agg(*_counts([]), *case_set)
    summaries = pl.concat(
        [
            by_manifold.with_columns(level=pl.lit("manifold")),
            by_model.with_columns(level=pl.lit("model"), manifold=pl.lit(POOLED)),
        ],
        how="diagonal",
    )
    summaries = _rates(summaries).with_columns(
        case_set=pl.col("case_set").map_elements(case_set_id, return_dtype=pl.String)
    )
    return points, summaries.sort(["level", "run_id", "model", "manifold"])


def case_set_id(case_ids: str) -> str:
    """A short, stable name of a set of cases: the hash of their sorted ids."""
    return hashlib.sha256(case_ids.encode()).hexdigest()[:12]
