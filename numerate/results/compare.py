"""Did a model get better or worse? Two runs' answers to the same cases, compared in pairs.

The answers are counted per grid point where they are (numerate.store.queries.
compared_counts: two stored runs, through any source with `.frame(sql, params)`, a
numerate.store.reader.Reader for `numerate compare` or a numerate.store.Store; counted_frames:
answers given as frames, by the same SQL in memory); the statistics (compare_counts) read
those counts alone.

Statistics (docs/statistics.md, "Comparing runs"): pairs are counted per grid point, and a group of
points (a model x manifold) is their mean with equal point weights, as in every summary
(numerate.kernel.design): each run's accuracy with its 95% interval; the paired difference
with the Bonett–Price adjusted Wald interval and the exact McNemar test, both on the group's
effective counts (its per-point shares times its effective number of pairs: with equal counts
per point, its pooled counts, or fewer where a point drawn toward the group's shares has more
variance than its own); Holm's adjustment across the groups with a discordant
pair; and the smallest drop the group would flag with 80% probability (numerate.kernel.power).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, get_args

import polars as pl

from numerate.kernel.design import binomial, point_mean, toward_mean
from numerate.kernel.power import minimum_detectable_drop
from numerate.kernel.stats import holm_over_discordant, mcnemar_exact, paired_difference_bounds
from numerate.store import queries
from numerate.store.queries import PAIR_KEYS, Source

__all__ = [
    "EXIT_REGRESSION",
    "Grouping",
    "alpha_text",
    "any_regression",
    "compare_counts",
    "compare_groups",
    "compare_runs",
    "compare_stored",
    "detectable_line",
    "estimate_text",
    "for_display",
    "summary_line",
]

EXIT_REGRESSION = 4
"""Exit code of `numerate compare --fail-on-regression` when a group regressed (2 is bad
input, 3 a failed run)."""

Grouping = Literal["manifold", "point"]
GROUPINGS: tuple[str, ...] = get_args(Grouping)

Verdict = Literal["regression", "improvement", "no change"]

ANSWER_COLUMNS = (*PAIR_KEYS, "correct")
"""What compare_runs reads of each run: one row per answer; `correct` true, false (a wrong,
unparsed or truncated answer) or null (an error: no answer at all)."""


def _checked(answers: pl.DataFrame, side: str) -> pl.DataFrame:
    missing = [c for c in ANSWER_COLUMNS if c not in answers.columns]
    if missing:
        raise ValueError(f"{side} answers lack column(s) {', '.join(missing)}")
    frame = answers.select(ANSWER_COLUMNS).with_columns(
        pl.col("model", "manifold", "point_key", "case_id").cast(pl.String),
        pl.col("sample_index").cast(pl.Int64),
        pl.col("correct").cast(pl.Boolean),
    )
    if frame.select(PAIR_KEYS).is_duplicated().any():
        raise ValueError(f"{side} answers: a (model, case_id, sample_index) appears twice")
    return frame


def _combine(points: list[dict[str, Any]]) -> dict[str, Any]:
    """A group's counts and paired statistics from its points' counts: totals, then the
    equal-weight means over the points with a pair and the group's effective counts."""
    group = {c: sum(p[c] for p in points) for c in _COUNTS}
    paired = [p for p in points if p["n"] > 0]
    if not paired:
        return group | {"points": 0} | dict.fromkeys(_STATISTICS)
    k, pairs = len(paired), group["n"]
    base = point_mean([binomial(p["base_correct"], p["n"]) for p in paired])
    new = point_mean([binomial(p["new_correct"], p["n"]) for p in paired])
    lost = sum(p["lost"] / p["n"] for p in paired) / k
    gained = sum(p["gained"] / p["n"] for p in paired) / k
    difference = gained - lost
    # the variance of the mean of per-point differences, as an effective number of pairs;
    # each point's at its shares, or drawn toward the group's where that is larger (a point
    # of one pair, lost, has a variance of 0 at its own, and beside 400 pairs would weigh
    # half the difference freely)
    variance = 0.0
    for p in paired:
        own = (p["lost"] / p["n"], p["gained"] / p["n"])
        drawn = (toward_mean(own[0], p["n"], lost), toward_mean(own[1], p["n"], gained))
        variance += max(_spread(*own), _spread(*drawn)) / p["n"]
    variance /= k * k
    spread = lost + gained - difference * difference
    effective = pairs if variance <= 0 or spread <= 0 else min(pairs, spread / variance)
    low, high = paired_difference_bounds(lost * effective, gained * effective, effective)
    return group | {
        "points": k,
        "base_accuracy": base.value, "base_low": base.low, "base_high": base.high,
        "new_accuracy": new.value, "new_low": new.low, "new_high": new.high,
        "difference": difference, "difference_low": low, "difference_high": high,
        "effective_lost": round(lost * effective), "effective_gained": round(gained * effective),
        "effective_n": round(effective),
    }  # fmt: skip


def _spread(lost: float, gained: float) -> float:
    """The variance of one pair's change (-1, 0 or +1) at these shares of lost and gained."""
    return lost + gained - (gained - lost) ** 2


def _note(row: dict[str, Any]) -> str:
    if row["n"] > 0:
        return ""
    if row["n_new_only"] == 0 and row["n_errors"] == 0:
        return "only in the base run"
    if row["n_base_only"] == 0 and row["n_errors"] == 0:
        return "only in the new run"
    if row["n_errors"]:
        return "every shared answer is an error"
    return "no shared cases"


def _verdict(difference: float | None, p_holm: float | None, alpha: float) -> Verdict | None:
    if difference is None or p_holm is None:
        return None
    if p_holm >= alpha or difference == 0:
        return "no change"
    return "regression" if difference < 0 else "improvement"


def compare_runs(
    base: pl.DataFrame, new: pl.DataFrame, by: Grouping = "manifold", alpha: float = 0.05
) -> pl.DataFrame:
    """Paired comparison of two runs' accuracy, per model and manifold (or grid point).

    Answers pair up by (model, case_id), each case by its first answer (sample_index 0: a
    case's samples are not independent pairs): the cases both runs answered. An
    unparsed or truncated answer is wrong (it is a wrong answer); an `error` is no answer
    at all (the endpoint failed, the model said nothing), so a pair with an error on either
    side is dropped and counted in `n_errors`. Answers without a partner are counted in
    `n_base_only` / `n_new_only`; a group with no pair at all gets null statistics, no
    verdict and a `note` saying why (e.g. "only in the base run").

    Args:
        base: the reference run's answers: model, manifold, point_key, case_id,
            sample_index, correct (bool, null for an error: ANSWER_COLUMNS).
        new: the run under test, the same columns.
        by: "manifold" groups by model x manifold; "point" by model x manifold x point_key.
        alpha: family-wise error rate: a group's verdict is a regression or improvement when
            its Holm-adjusted McNemar p-value is below alpha, else "no change". Holm runs
            over the groups with a discordant pair; the others get p_holm = 1.

    Returns one row per group: the keys, n (pairs), n_base_only, n_new_only, n_errors,
    base_correct, new_correct, points (grid points with a pair), base_accuracy /
    new_accuracy (means over the points) with their 95% bounds (*_low, *_high), difference
    (new - base, mean over the points) with difference_low / difference_high, lost (base
    right, new wrong: McNemar's b), gained (base wrong, new right: c), p_value, p_holm,
    detectable_drop (the smallest true drop flagged with 80% probability; null when none
    would be), verdict, note.
    """
    counts = queries.counted_frames(_checked(base, "base"), _checked(new, "new"))
    return compare_counts(counts, by, alpha)


def compare_stored(
    source: Source,
    runs: tuple[str, str],
    by: Grouping = "manifold",
    alpha: float = 0.05,
    **which: Any,
) -> pl.DataFrame:
    """compare_runs of two stored runs (`runs`: base, new), their answers counted where they
    are; `which`: models, manifolds or pairing, as numerate.store.queries.compared_counts
    takes them. An answer's outcome is read as compare_runs' `correct`: an unparsed or
    truncated answer is wrong, an error no answer."""
    return compare_counts(queries.compared_counts(source, runs, **which), by, alpha)


def compare_counts(counts: pl.DataFrame, by: Grouping, alpha: float) -> pl.DataFrame:
    """compare_runs' comparison from the answers' counts per grid point (model, manifold,
    point_key and the counts of numerate.store.queries.compared_counts); ValueError naming a
    grouping or an alpha it cannot take."""
    if by not in GROUPINGS:
        raise ValueError(f"by={by!r}: choose {' or '.join(GROUPINGS)}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha}: need 0 < alpha < 1")
    point_keys = ["model", "manifold", "point_key"]
    keys = point_keys if by == "point" else ["model", "manifold"]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in counts.iter_rows(named=True):
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    rows = compare_groups(groups, keys, alpha)
    schema = _schema(keys)
    return pl.DataFrame([{c: row[c] for c in schema} for row in rows], schema=schema).sort(keys)


def compare_groups(
    groups: dict[tuple[str, ...], list[dict[str, Any]]], keys: Sequence[str], alpha: float
) -> list[dict[str, Any]]:
    """compare_runs' statistics for groups of grid points already counted: each group (its
    key's values name `keys`) holds its points' counts (n, n_base_only, n_new_only, n_errors,
    base_correct, new_correct, lost, gained); one family, Holm over its groups. Rows as
    compare_runs' (a dict each)."""
    rows = [dict(zip(keys, key, strict=True)) | _combine(points) for key, points in groups.items()]
    _test_groups(rows, alpha)
    for row in rows:
        row.setdefault("p_holm", None)
        row.setdefault("detectable_drop", None)
        row["verdict"] = _verdict(row["difference"], row["p_holm"], alpha)
        row["note"] = _note(row)
    return rows


def _test_groups(rows: list[dict[str, Any]], alpha: float) -> None:
    """Each compared group's exact McNemar p-value on its effective counts, Holm over the
    groups with a discordant pair, and the smallest drop it would flag (in place)."""
    for row in rows:
        compared = row["points"] > 0
        row["p_value"] = (
            mcnemar_exact(row["effective_lost"], row["effective_gained"]) if compared else None
        )
    tested = [i for i, row in enumerate(rows) if row["p_value"] is not None]
    discordant = [rows[i]["lost"] + rows[i]["gained"] for i in tested]
    adjusted = holm_over_discordant([rows[i]["p_value"] for i in tested], discordant)
    family = max(1, sum(d > 0 for d in discordant))
    for i, p_holm in zip(tested, adjusted, strict=True):
        row = rows[i]
        row["p_holm"] = p_holm
        in_family = row["lost"] + row["gained"] > 0
        row["detectable_drop"] = minimum_detectable_drop(
            row["effective_n"],
            min(row["effective_n"], row["effective_lost"] + row["effective_gained"]),
            alpha,
            family if in_family else family + (1 if any(discordant) else 0),
        )


_COUNTS = ("n", "n_base_only", "n_new_only", "n_errors", "base_correct", "new_correct",
           "lost", "gained")  # fmt: skip
_STATISTICS = ("base_accuracy", "base_low", "base_high", "new_accuracy", "new_low", "new_high",
               "difference", "difference_low", "difference_high", "effective_lost",
               "effective_gained", "effective_n")  # fmt: skip


def _schema(keys: list[str]) -> dict[str, Any]:
    counts = ["n", "n_base_only", "n_new_only", "n_errors", "base_correct", "new_correct"]
    floats = ["base_accuracy", "base_low", "base_high", "new_accuracy", "new_low", "new_high",
              "difference", "difference_low", "difference_high"]  # fmt: skip
    return (
        {k: pl.String for k in keys}
        | {c: pl.Int64 for c in counts}
        | {"points": pl.Int64}
        | {f: pl.Float64 for f in floats}
        | {"lost": pl.Int64, "gained": pl.Int64, "p_value": pl.Float64, "p_holm": pl.Float64}
        | {"detectable_drop": pl.Float64, "verdict": pl.String, "note": pl.String}
    )


def any_regression(comparison: pl.DataFrame) -> bool:
    """Whether some group of a comparison is a significant regression."""
    return bool((comparison["verdict"] == "regression").any())


def summary_line(comparison: pl.DataFrame) -> str:
    """One line for people: "2 regressions, 1 improvement, 5 no change over 3,000 paired
    cases", then groups that could not be compared and answers left unpaired."""
    verdicts = comparison["verdict"].to_list()
    total = {c: int(comparison[c].sum()) for c in ("n", "n_base_only", "n_new_only", "n_errors")}

    def count(verdict: str, plural: str) -> str:
        k = verdicts.count(verdict)
        return f"{k} {verdict if k == 1 else plural}"

    line = (
        f"{count('regression', 'regressions')}, {count('improvement', 'improvements')}, "
        f"{verdicts.count('no change')} no change over {total['n']:,} paired "
        f"case{'' if total['n'] == 1 else 's'}"
    )
    skipped = verdicts.count(None)
    unpaired = total["n_base_only"] + total["n_new_only"]
    errors = total["n_errors"]
    extra = [
        f"{skipped} group(s) not compared" if skipped else "",
        f"{unpaired:,} case(s) without a partner" if unpaired else "",
        f"{errors:,} pair(s) dropped for an error" if errors else "",
    ]
    return "; ".join([line, *filter(None, extra)])


def _drop(drop: float | None, compared: bool) -> str:
    if not compared:
        return "-"
    return "none" if drop is None else f"{drop:.3f}"


def alpha_text(alpha: float) -> str:
    """An alpha as given, not rounded: `:g` wrote 0.9999999999999999 as 1 (and `--alpha 1`
    is refused)."""
    return repr(float(alpha))


def detectable_line(comparison: pl.DataFrame, alpha: float = 0.05) -> str:
    """What the comparison could see, in one line: "a drop of 9 points or more in any model x
    manifold would have been caught (80% probability, alpha 0.05, 15 groups)", naming the
    groups too small for any drop to be caught."""
    compared = comparison.filter(pl.col("p_holm").is_not_null())
    if compared.is_empty():
        return "no group was compared, so no drop could have been caught"
    group = "grid point" if "point_key" in comparison.columns else "model x manifold"
    blind = compared.filter(pl.col("detectable_drop").is_null())
    seen = compared["detectable_drop"].drop_nulls()
    parts = []
    if not seen.is_empty():
        points = math.ceil(100 * float(seen.max()) - 1e-9)  # type: ignore[arg-type]
        where = f"any {group}" if blind.is_empty() else f"any other {group}"
        unit = "point" if points == 1 else "points"
        parts.append(f"a drop of {points} {unit} or more in {where} would have been caught")
    if not blind.is_empty():
        names = ", ".join(
            "/".join(str(row[k]) for k in ("model", "manifold", "point_key") if k in row)
            for row in blind.iter_rows(named=True)
        )
        parts.append(f"too few pairs to catch any drop in {names}")
    return "; ".join(parts) + (
        f" (80% probability, alpha {alpha_text(alpha)}, {compared.height} group"
        f"{'' if compared.height == 1 else 's'})"
    )


def estimate_text(
    value: float | None, low: float | None, high: float | None, signed: bool = False
) -> str:
    """An estimate with its interval in one cell, "0.812 [0.790, 0.833]" (a difference
    `signed`: "+0.012 [-0.010, +0.034]"); "-" without one."""
    if value is None or low is None or high is None:
        return "-"
    fmt = "+.3f" if signed else ".3f"
    return f"{value:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def for_display(comparison: pl.DataFrame) -> pl.DataFrame:
    """A comparison made readable in a terminal or Markdown: each estimate with its 95%
    interval in one cell, the Holm-adjusted p-value, and the counts of unpaired or errored
    answers only where some group has any."""

    def p(value: float | None) -> str:
        return "-" if value is None else f"{value:.2g}" if value < 0.001 else f"{value:.3f}"

    optional = [c for c in ("n_base_only", "n_new_only", "n_errors") if comparison[c].sum() > 0]
    rows = []
    for row in comparison.iter_rows(named=True):
        shown: dict[str, Any] = {
            k: row[k] for k in ("model", "manifold", "point_key", "n") if k in row
        }
        shown |= {c.removeprefix("n_").replace("_", " "): row[c] for c in optional}
        shown["base [95% CI]"] = estimate_text(
            row["base_accuracy"], row["base_low"], row["base_high"]
        )
        shown["new [95% CI]"] = estimate_text(row["new_accuracy"], row["new_low"], row["new_high"])
        shown["new - base [95% CI]"] = estimate_text(
            row["difference"], row["difference_low"], row["difference_high"], signed=True
        )
        shown |= {"lost": row["lost"], "gained": row["gained"], "p (Holm)": p(row["p_holm"])}
        shown["detectable drop"] = _drop(row["detectable_drop"], row["p_holm"] is not None)
        shown["verdict"] = row["verdict"] or row["note"]
        rows.append(shown)
    return pl.DataFrame(rows) if rows else comparison
