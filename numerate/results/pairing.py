"""Which answers of two runs `numerate compare` pairs: the same model on both sides, two
models named, or each run's only model; and why nothing pairs up when nothing does."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import polars as pl

from numerate.kernel.errors import ConfigError
from numerate.results.compare import GROUPINGS, Grouping, compare_counts
from numerate.results.report import require_known
from numerate.store.queries import Source, answered, compared_counts


def _present(reader: Source, run_id: str, column: str) -> list[str]:
    """The models or manifolds a run answered for."""
    return answered(reader, run_id, column)


def _check_present(reader: Source, wanted: list[tuple[str, str, str, list[str]]]) -> None:
    """ConfigError naming what a run has when it lacks a model or manifold asked for."""
    for run_id, option, column, values in wanted:
        if values:
            require_known(run_id, option, column, values, _present(reader, run_id, column))


def load_pair(
    reader: Source,
    runs: tuple[str, str],
    models: list[str],
    pairing: tuple[str | None, str | None],
    manifolds: list[str],
    note: Callable[[str], object],
) -> pl.DataFrame:
    """Both runs' answers counted per grid point (numerate.store.queries.compared_counts),
    their models paired: the same model on both sides (all, or --model), two named models
    (--base-model, --new-model) or each run's only model (`note` says so)."""
    (base_id, new_id), (base_model, new_model) = runs, pairing
    if models and (base_model or new_model):
        raise ConfigError("--model cannot be combined with --base-model / --new-model")
    if (base_model is None) != (new_model is None):
        raise ConfigError("--base-model and --new-model go together: name both")
    _check_present(reader, [
        (base_id, "--base-model" if base_model else "--model", "model",
         [base_model] if base_model else models),
        (new_id, "--new-model" if new_model else "--model", "model",
         [new_model] if new_model else models),
        (base_id, "--manifold", "manifold", manifolds),
        (new_id, "--manifold", "manifold", manifolds),
    ])  # fmt: skip
    found = {run_id: _present(reader, run_id, "model") for run_id in runs}
    one_each = len(found[base_id]) == len(found[new_id]) == 1
    if base_model is None and one_each and found[base_id] != found[new_id]:
        # one model in each run, under different names (renamed, or two baselines): pair them
        base_model, new_model = found[base_id][0], found[new_id][0]
        note(f"pairing model {base_model!r} of BASE with {new_model!r} of NEW")
    if base_model is None or new_model is None:
        return compared_counts(reader, runs, models, manifolds)
    label = base_model if base_model == new_model else f"{base_model} -> {new_model}"
    return compared_counts(reader, runs, (), manifolds, (base_model, new_model, label))


def check_grouping(by: str) -> Grouping:
    """`--by` checked: manifold or point."""
    if by not in GROUPINGS:
        raise ConfigError(f"--by {by!r}: choose {' or '.join(GROUPINGS)}")
    return cast("Grouping", by)


def compare_pair(
    counts: pl.DataFrame, by: Grouping, alpha: float, runs: tuple[str, str]
) -> pl.DataFrame:
    """compare_counts of `load_pair`'s counts, then ConfigError, saying why, when no answer
    pairs up."""
    comparison = compare_counts(counts, by, alpha)
    if comparison.is_empty() or comparison["n"].sum() == 0:
        raise ConfigError(_nothing_shared(counts, runs))
    return comparison


def _nothing_shared(counts: pl.DataFrame, runs: tuple[str, str]) -> str:
    said = f"runs {runs[0]} and {runs[1]} share no answered cases to compare"
    shared = pl.col("n") + pl.col("n_errors")
    sides = counts.group_by("model").agg(
        base=(shared + pl.col("n_base_only")).sum(), new=(shared + pl.col("n_new_only")).sum()
    )
    base_models = set(sides.filter(pl.col("base") > 0)["model"])
    new_models = set(sides.filter(pl.col("new") > 0)["model"])
    if not base_models or not new_models:
        side = "BASE" if not base_models else "NEW"
        return f"{said}: {side} has no answers (with these options)"
    if counts["n_errors"].sum() > 0:
        return f"{said}: every answer they share is an error on one side"
    if not base_models & new_models:
        return (
            f"{said}: their models differ ({', '.join(sorted(base_models))} vs "
            f"{', '.join(sorted(new_models))}); pair two with --base-model and --new-model"
        )
    return f"{said}: they asked different cases (another seed, manifolds or grid points)"
