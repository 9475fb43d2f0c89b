"""What a run shows in the Prefect UI: its results table and its summary, built from the store.

Pure of Prefect: tasks/artifacts.py publishes what these functions build. Keys are stable per
sweep (`nightly-results`, `nightly-summary`), so the UI keeps each night's version under one
key and shows their history.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from numerate.results.report import render, run_summaries
from numerate.store import queries
from numerate.store.queries import Source, previous_run

__all__ = [
    "artifact_key", "comparison_lines", "find_regressions", "numgen_markdown", "previous_run",
    "results_table", "run_markdown",
]  # fmt: skip


def artifact_key(name: str, what: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for a sweep's `what`."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "run"
    return f"{slug}-{what}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def results_table(source: Source, run_id: str) -> list[dict[str, Any]]:
    """One row per model x manifold (manifold `*`: every manifold): n, accuracy (the mean over
    grid points) with its 95% interval, chance-adjusted accuracy, error, truncation and
    unparsed rates; pass@k, maj@k and consistency when the run has several samples per case."""
    rows = []
    for row in run_summaries(source, run_id).iter_rows(named=True):
        rows.append(
            {
                "model": row["model"],
                "manifold": row["manifold"],
                "n": row["n"],
                "accuracy": _num(row["accuracy"]),
                "95% interval": f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]",
                "adjusted": _num(row["chance_adjusted"]),
                "errors": _pct(row["error_rate"]),
                "truncated": _pct(row["truncation_rate"]),
                "unparsed": _pct(row["unparsed_rate"]),
                "score": _num(row["score"]),
                "score interval": "-"
                if row["score_low"] is None
                else f"[{_num(row['score_low'])}, {_num(row['score_high'])}]",
                "tier": "-" if row["tier"] is None else row["tier"],
            }
            | (  # runs with several samples per case (run_summaries keeps them only then)
                {
                    f"pass@{row['samples']}": _num(row["pass_at_k"]),
                    f"maj@{row['samples']}": _num(row["maj_at_k"]),
                    "consistency": _pct(row["consistency"]),
                }
                if "pass_at_k" in row
                else {}
            )
        )
    return rows


def numgen_markdown(
    run_id: str, db: str, generator: str, detector: str, metrics: Mapping[str, object],
    agreement: str = "",
) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    """A NumGen run's metrics as a one-row table (numbers to 3 decimals) and its summary
    (`agreement`: of a run that counted another's images, in Markdown)."""
    shown = {
        k: (f"{v:.3f}" if isinstance(v, float) else v)
        for k, v in metrics.items()
        if isinstance(v, int | float | str) and k not in ("heatmap", "run_id")
    }
    table = [{"generator": generator, "detector": detector, **shown}]
    lines = [
        f"# NumGen: {generator} / {detector}, run `{run_id}`",
        "",
        f"- database: `{absolute(db)}` (`numerate numgen report --db {absolute(db)}`)",
        f"- confusion matrix heatmap: `{absolute(str(metrics.get('heatmap') or '-'))}`",
        "",
        *_table(list(table[0]), [list(table[0].values())]),
    ]
    return table, "\n".join(lines) + "\n" + agreement


def absolute(path: str) -> str:
    """A path as an operator reading the Prefect UI can use it: absolute (the worker's working
    directory is not theirs to see); URLs and "-" as they are."""
    if path == "-" or "://" in path:
        return path
    return os.path.abspath(path)


def comparison_lines(source: Source, base: str, new: str, alpha: float = 0.05) -> list[str]:
    """The paired comparison of `new` with `base` (numerate.results.compare, per model and manifold,
    at family-wise `alpha`: the nightly gate's) as Markdown lines: its summary line, what it
    could have seen and the table."""
    from numerate.results.compare import (  # scipy: a comparison only
        alpha_text,
        compare_stored,
        detectable_line,
        for_display,
        summary_line,
    )

    comparison = compare_stored(source, (base, new), alpha=alpha)
    if comparison.is_empty() or int(comparison["n"].sum()) == 0:
        return [f"Run `{base}` shares no answered case with this run."]
    table = render(for_display(comparison), "markdown").rstrip("\n").splitlines()
    given = "" if alpha == 0.05 else f" --alpha {alpha_text(alpha)}"
    command = f"numerate compare {base} {new}{given}"
    return [
        f"Against `{base}` (`{command}`): {summary_line(comparison)}.",
        "",
        f"What it could see: {detectable_line(comparison, alpha)}.",
        "",
        *table,
    ]


def find_regressions(
    source: Source, base: str, new: str, alpha: float = 0.05
) -> tuple[list[str], str]:
    """Each model x manifold significantly worse in `new` than in `base` at family-wise
    `alpha`, as a line ("oracle/objects 1.000 -> 0.400 (p = 0.0001)"), and what the
    comparison could have seen (numerate.results.compare.detectable_line)."""
    from numerate.results.compare import compare_stored, detectable_line  # scipy

    comparison = compare_stored(source, (base, new), alpha=alpha)
    worse = comparison.filter(comparison["verdict"] == "regression")
    return [
        f"{row['model']}/{row['manifold']} {row['base_accuracy']:.3f} -> "
        f"{row['new_accuracy']:.3f} (p = {row['p_holm']:.2g})"
        for row in worse.iter_rows(named=True)
    ], detectable_line(comparison, alpha)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return lines


def run_markdown(
    source: Source,
    run_id: str,
    db: str,
    comparison: Sequence[str] = (),
    plot: str | None = None,
    view: str | None = None,
) -> str:
    """The run's summary: id, database, sweep and config, how each model's part ended, the
    pooled results, the comparison with the previous run (its lines), where the plot is and
    where its pages of `numerate view` are (`view`, a file of the export)."""
    run = queries.run_record(source, run_id)
    if run is None:
        raise ValueError(f"no run {run_id!r} in {source.path}")
    parts = queries.run_parts(source, run_id)
    pooled = [
        [r["model"], r["n"], r["accuracy"], r["95% interval"], r["adjusted"], r["errors"],
         r["score"], r["score interval"], r["tier"]]
        for r in results_table(source, run_id)
        if r["manifold"] == queries.POOLED
    ]  # fmt: skip
    lines = [
        f"# {run.sweep}: run `{run_id}` ({run.status})",
        "",
        f"- database: `{absolute(db)}` (`numerate report --db {absolute(db)} --run {run_id}`)",
        f"- config `{run.config_hash}`, code `{run.code_version}`",
        f"- started {run.started:%Y-%m-%d %H:%M:%S %Z}"
        + (f", finished {run.finished:%Y-%m-%d %H:%M:%S %Z}" if run.finished else ""),
        "",
        "## Models",
        "",
        *_table(
            ["model", "part", "cause", "answers", "errors"],
            [[p.model, p.status, p.cause, p.n, p.errors] for p in parts],
        ),
        "",
        "## Results (every manifold pooled)",
        "",
        *_table(
            [
                "model",
                "n",
                "accuracy",
                "95% interval",
                "adjusted",
                "errors",
                "score",
                "score interval",
                "tier",
            ],
            pooled,
        ),
        "",
        "Score: chance-adjusted, truncation-penalised accuracy, per-point means per manifold, "
        "geometric mean over manifolds, with its 95% interval; tier: no two models of a tier "
        f"differ in paired tests (`numerate report --run {run_id} --tiers`; docs/statistics.md).",
        "",
        "## Compared with the previous run",
        "",
        *(comparison or ["No previous run of this sweep to compare with."]),
    ]
    if plot:
        lines += ["", f"Plot: `{plot}` (`numerate plot {run_id}` draws it again)"]
    if view:
        link = f"[{view}]({Path(view).as_uri()})"
        lines += ["", f"Browse it, from the leaderboard to each case: {link}"]
    return "\n".join(lines) + "\n"
