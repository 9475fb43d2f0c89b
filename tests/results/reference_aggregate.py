"""The aggregation as it was before it reduced the answers in SQL (numerate 3a9c61d,
numerate/results/aggregate.py: every answer of a run in polars frames in memory), the
reference tests/flows/test_sweep.py and tests/results/test_aggregate.py compare the reduced
aggregation with: each point's figures from a list entry per case, through
numerate.kernel's definitions (numerate.kernel.samples.majority_vote and agrees, which the
aggregation now reads in SQL). The columns' arithmetic (rates, estimate columns, the
summaries' means over points) is written out here, a row at a time, from docs/schema.md's
definitions (it was imported from the aggregation it checks: three wrong changes to it
passed)."""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl

from numerate.kernel.design import Estimate, case_clustered, point_mean
from numerate.kernel.samples import agrees, majority_vote, pass_at_k
from numerate.kernel.stats import chance_adjusted
from numerate.store.queries import POOLED
from numerate.store.reductions import FLOORS, POINT_KEYS, completed

MULTI_SAMPLE = ["pass_at_k", "maj_at_k", "consistency"]
POINT_MEANS = [*FLOORS, "truncation_rate", "unparsed_rate", *MULTI_SAMPLE]

OUTCOMES = ("correct", "wrong", "unparsed", "truncated", "error")
"""What a summary averages over its points (besides accuracy)."""


def _scored_mean(column: str) -> pl.Expr:
    # over the scored cases, like accuracy; over all when every case errored
    return pl.coalesce(
        pl.col(column).filter(pl.col("outcome") != "error").mean(), pl.col(column).mean()
    ).alias(column)


def _counts() -> list[pl.Expr]:
    return [
        pl.len().alias("n"),
        *[(pl.col("outcome") == o).sum().cast(pl.Int32).alias(o) for o in OUTCOMES],
        pl.col("completion_tokens").cast(pl.Float64).mean().alias("mean_completion_tokens"),
        pl.col("completion_tokens").cast(pl.Float64).median().alias("median_completion_tokens"),
        pl.col("latency_s").mean().alias("mean_latency_s"),
    ]


def _points(joined: pl.DataFrame) -> tuple[pl.DataFrame, list[Estimate]]:
    scored = pl.col("outcome") != "error"
    per_case = joined.group_by([*POINT_KEYS, "case_id"]).agg(
        answers=pl.len(),
        scored=scored.sum(),
        correct=(pl.col("outcome") == "correct").sum(),
        votes=pl.col("answer").filter(scored),
        grades=(pl.col("outcome") == "correct").filter(scored),
    )
    lists = per_case.group_by(POINT_KEYS).agg(
        case_answers="answers", case_scored="scored", case_correct="correct",
        case_votes="votes", case_grades="grades",
    )  # fmt: skip
    counts = joined.group_by(POINT_KEYS).agg(
        *_counts(), *[_scored_mean(c) for c in FLOORS], pl.col("params").first()
    )
    points = _with_rates(counts.join(lists, on=POINT_KEYS)).sort(POINT_KEYS)
    figures = [_case_figures(row) for row in points.iter_rows(named=True)]
    estimates = [f["estimate"] for f in figures]
    points = points.drop(
        "case_answers", "case_scored", "case_correct", "case_votes", "case_grades"
    ).with_columns(
        samples=pl.Series([f["samples"] for f in figures], dtype=pl.Int32),
        **{c: pl.Series([f.get(c) for f in figures], dtype=pl.Float64) for c in MULTI_SAMPLE},
    )
    return _with_estimates(points, estimates), estimates


def _case_figures(row: dict[str, Any]) -> dict[str, Any]:
    """A point's estimate and multi-sample figures from its cases' lists (one entry per case:
    correct and scored counts, and the scored samples' answers and grades)."""
    cases = list(zip(row["case_correct"], row["case_scored"], strict=True))
    estimate = case_clustered((c, s, 1) for c, s in cases)
    samples = max(row["case_answers"], default=1)
    figures: dict[str, Any] = {"estimate": estimate, "samples": samples}
    if samples > 1:
        votes = zip(cases, row["case_votes"], row["case_grades"], strict=True)
        scored = [(c, s, a, g) for (c, s), a, g in votes if s > 0]
        if scored:
            figures["pass_at_k"] = sum(pass_at_k(s, c, min(samples, s)) for c, s, _, _ in scored)
            figures["pass_at_k"] /= len(scored)
            majority = [majority_vote(list(zip(a, g, strict=True))) for _, _, a, g in scored]
            figures["maj_at_k"] = sum(majority) / len(majority)
        several = [a for _, s, a, _ in scored if s > 1]
        if several:
            figures["consistency"] = sum(agrees(a) for a in several) / len(several)
    return figures


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None)


def _with_rates(frame: pl.DataFrame) -> pl.DataFrame:
    """n_scored = n - error; truncation and unparsed rates over n_scored (none without a
    scored answer), the error rate over n."""
    rows = []
    for row in frame.iter_rows(named=True):
        scored = row["n"] - row["error"]
        rows.append({
            **row, "n_scored": scored, "error_rate": row["error"] / row["n"],
            "truncation_rate": row["truncated"] / scored if scored else None,
            "unparsed_rate": row["unparsed"] / scored if scored else None,
        })  # fmt: skip
    return _frame(rows)


def _with_estimates(frame: pl.DataFrame, estimates: list[Estimate]) -> pl.DataFrame:
    """Each row with its estimate: the value (accuracy), se and interval, and accuracy above
    its chance floor."""
    rows = [
        {**row, "accuracy": e.value, "se": e.se, "ci_low": e.low, "ci_high": e.high,
         "chance_adjusted": chance_adjusted(e.value, row["chance"])}
        for row, e in zip(frame.iter_rows(named=True), estimates, strict=True)
    ]  # fmt: skip
    return _frame(rows)


def _mean(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _summaries(
    totals: pl.DataFrame, points: pl.DataFrame, estimates: list[Estimate], keys: list[str]
) -> pl.DataFrame:
    """Per group: its totals over answers (counts, error rate, tokens, latency), and over its
    points with a scored answer (`points` of them) the mean of each point's figures, the floors
    over every point where none has one; its estimate is its points' (point_mean)."""
    rows, group_estimates = [], []
    listed = list(points.iter_rows(named=True))
    for total in totals.iter_rows(named=True):
        mine = [i for i, p in enumerate(listed) if all(p[k] == total[k] for k in keys)]
        scored = [i for i in mine if listed[i]["n_scored"] > 0]
        row = dict(total)
        row |= {"n_scored": total["n"] - total["error"],
                "error_rate": total["error"] / total["n"], "points": len(scored),
                "samples": max(listed[i]["samples"] for i in mine)}  # fmt: skip
        for column in POINT_MEANS:
            over = scored if scored or column not in FLOORS else mine
            row[column] = _mean([listed[i][column] for i in over])
        group_estimates.append(point_mean([estimates[i] for i in mine]))
        rows.append(row)
    return _with_estimates(_frame(rows), group_estimates)


def _totals(joined: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """A group's totals over its answers, with its case set and manifolds, from every answer."""
    return (
        joined.group_by(keys)
        .agg(
            *_counts(),
            pl.col("case_id").unique().sort().str.join(",").alias("case_set"),
            pl.col("manifold").unique().sort().str.join(",").alias("manifolds"),
        )
        .with_columns(case_set=pl.col("case_set").map_elements(case_set_id, return_dtype=pl.String))
    )


def aggregate(responses: pl.DataFrame, cases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """numerate.results.aggregate.aggregate, as it was: every answer joined to its case in
    one polars frame, grouped there."""
    responses, cases = completed(responses, cases)
    joined = responses.with_columns(pl.col("answer").cast(pl.String)).join(
        cases.select("case_id", "params", *FLOORS).with_columns(pl.col(FLOORS).cast(pl.Float64)),
        on="case_id",
        how="left",
    )
    if joined["chance"].null_count():
        missing = joined.filter(pl.col("chance").is_null())["case_id"][0]
        raise ValueError(f"response for case {missing!r} has no stored case")
    points, estimates = _points(joined)
    by_manifold, by_model = ["run_id", "model", "manifold"], ["run_id", "model"]
    summaries = pl.concat(
        [
            _summaries(_totals(joined, by_manifold), points, estimates, by_manifold)
            .with_columns(level=pl.lit("manifold")),
            _summaries(_totals(joined, by_model), points, estimates, by_model)
            .with_columns(level=pl.lit("model"), manifold=pl.lit(POOLED)),
        ],
        how="diagonal",
    )  # fmt: skip
    return points, summaries.sort(["level", "run_id", "model", "manifold"])


def case_set_id(case_ids: str) -> str:
    """A short, stable name of a set of cases: the hash of their sorted ids."""
    return hashlib.sha256(case_ids.encode()).hexdigest()[:12]
