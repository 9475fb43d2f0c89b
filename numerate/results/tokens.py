"""What a run's answers spent: token efficiency, and the token budget as a survival curve
(the share of cases still without an answer as completion tokens grow, an answer truncated at
max_tokens censored at its count: docs/statistics.md, "Tokens")."""

from __future__ import annotations

import polars as pl

from numerate.kernel.survival import SurvivalCurve, kaplan_meier
from numerate.results.report import Table
from numerate.store import queries
from numerate.store.queries import Source


def budget_curves(source: Source, run_id: str) -> dict[tuple[str, str], SurvivalCurve]:
    """The Kaplan-Meier curve of each model and manifold of a run."""
    return {
        (model, manifold): kaplan_meier([float(t) for t in tokens], ended)
        for model, manifold, tokens, ended in queries.token_budgets(source, run_id)
    }


def budget_frame(source: Source, run_id: str) -> pl.DataFrame:
    """`budget_table` of a run's curves."""
    return budget_table(budget_curves(source, run_id))


def budget_table(curves: dict[tuple[str, str], SurvivalCurve]) -> pl.DataFrame:
    """Per model and manifold: answers with a token count, those truncated (censored), and the
    median completion tokens to an answer with its 95% interval (null where the curve does not
    fall to one half: more than half the cases truncated)."""
    shown = []
    for (model, manifold), curve in curves.items():
        low, high = curve.median_interval
        shown.append({
            "model": model, "manifold": manifold, "answers": curve.n,
            "truncated": curve.censored, "median_tokens_to_answer": curve.median,
            "ci_low": low, "ci_high": high,
        })  # fmt: skip
    return pl.DataFrame(shown, schema_overrides={
        "median_tokens_to_answer": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
    })  # fmt: skip


def token_tables(source: Source, run_id: str, by_point: bool = False) -> list[Table]:
    """`numerate report --tokens`: token efficiency per model and manifold (and grid point,
    `by_point`), the token budget, and how much the reasoning repeats itself."""
    efficiency = queries.token_efficiency(source, run_id, by_point)
    shown = [
        Table("tokens", "tokens: what the answers spent (errors left out)", efficiency),
        Table("token_budget",
              "token budget: completion tokens to an answer (truncated answers censored)",
              budget_frame(source, run_id)),
    ]  # fmt: skip
    loops = queries.reasoning_loops(source, run_id)
    if loops.height:  # answers came with a reasoning
        title = "loops: how much the reasoning repeats itself (its compression ratio)"
        shown.append(Table("loops", title, loops))
        title = "the reasoning that repeats itself most (`numerate view` shows each case)"
        shown.append(Table("most_repetitive", title, queries.most_repetitive(source, run_id)))
    return shown
