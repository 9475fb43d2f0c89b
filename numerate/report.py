"""Reading results back: the leaderboard and per-manifold tables, in several formats."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any, Literal, Protocol

Format = Literal["table", "csv", "json", "markdown"]

SUMMARY_COLUMNS = (
    "model", "manifold", "n", "n_scored", "accuracy", "ci_low", "ci_high", "chance",
    "chance_adjusted", "unparsed_rate", "truncation_rate", "error_rate", "mean_completion_tokens",
)  # fmt: skip


class Source(Protocol):
    """What reports read from: a numerate.store.Store or a numerate.store.reader.Reader."""

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]: ...

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...


def _filters(models: Sequence[str], manifolds: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL conditions (and their parameters) keeping only the given models and manifolds."""
    sql = ""
    params: list[Any] = []
    if models:
        sql += " AND list_contains(?, model)"
        params.append(list(models))
    if manifolds:
        sql += " AND (manifold = '*' OR list_contains(?, manifold))"
        params.append(list(manifolds))
    return sql, params


def run_summaries(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> Any:
    """The run's summaries: per model over all manifolds (manifold '*'), then per manifold;
    only the given models and manifolds when any are given."""
    names = ", ".join(SUMMARY_COLUMNS)
    where, params = _filters(models, manifolds)
    return source.frame(
        f"SELECT {names} FROM summaries WHERE run_id = ?{where} "
        "ORDER BY model, (manifold = '*') DESC, manifold",
        [run_id, *params],
    )


def run_points(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> Any:
    """The run's grid points, filtered like run_summaries."""
    where, params = _filters(models, manifolds)
    return source.frame(
        "SELECT model, manifold, point_key, n, accuracy, ci_low, ci_high, ci_width, stop_reason, "
        "chance_adjusted, unparsed_rate, truncation_rate, error_rate "
        f"FROM points WHERE run_id = ?{where} "
        "ORDER BY model, manifold, point_key",
        [run_id, *params],
    )


def require_known(
    run_id: str, option: str, column: str, wanted: Sequence[str], known: Sequence[str]
) -> None:
    """ConfigError naming the first of `wanted` that is not among the run's `known` models or
    manifolds, and listing those it has (the check of report, compare and plot filters)."""
    from numerate.kernel.errors import ConfigError

    unknown = [name for name in wanted if name not in known]
    if unknown:
        has = ", ".join(known) or "no results yet"
        raise ConfigError(
            f"{option} {unknown[0]!r}: run {run_id} has no such {column} (it has {has})"
        )


def check_filters(
    source: Source, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> None:
    """ConfigError naming a model or manifold the run does not have, and those it has."""
    for option, column, wanted in (
        ("--model", "model", models),
        ("--manifold", "manifold", manifolds),
    ):
        if not wanted:
            continue
        known = [r[0] for r in source.query(
            f"SELECT DISTINCT {column} FROM summaries WHERE run_id = ? AND {column} <> '*' "
            "ORDER BY 1", [run_id])]  # fmt: skip
        require_known(run_id, option, column, wanted, known)


def run_state(source: Source, run_id: str) -> str | None:
    """A line for a run that is not finished (still running, degraded, failed...), else None."""
    rows = source.query(
        "SELECT status, started_at, (SELECT count(*) FROM responses r WHERE r.run_id = ?) "
        "FROM runs WHERE run_id = ?",
        [run_id, run_id],
    )
    if not rows or rows[0][0] == "finished":
        return None
    status, started, answered = rows[0]
    if status == "running":
        return (
            f"run {run_id} is still running (started {started:%Y-%m-%d %H:%M}, "
            f"{answered} answers so far): the figures are partial"
        )
    return f"run {run_id} ended {status}"


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if column == "mean_completion_tokens" else f"{value:.3f}"
    return str(value)


_RATES = {"unparsed_rate": "unparsed", "truncation_rate": "truncated", "error_rate": "errors"}
_FORMATTED = {"accuracy [95% CI]", "adjusted", "tokens", *_RATES.values()}


def for_terminal(frame: Any) -> Any:
    """A frame made readable, every column kept in its place: accuracy with its interval in one
    column (when ci_low and ci_high are there), rates as percentages, tokens to one decimal."""
    import polars as pl

    columns = frame.columns
    interval = {"accuracy", "ci_low", "ci_high"}.issubset(columns)

    def num(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    rows = []
    for row in frame.iter_rows(named=True):
        shown: dict[str, Any] = {}
        for column in columns:
            value = row[column]
            if interval and column in ("ci_low", "ci_high"):
                continue
            if interval and column == "accuracy":
                shown["accuracy [95% CI]"] = (
                    f"{num(value)} [{num(row['ci_low'])}, {num(row['ci_high'])}]"
                )
            elif column in _RATES and isinstance(value, float | None):
                shown[_RATES[column]] = pct(value)
            elif column == "chance_adjusted" and isinstance(value, float | None):
                shown["adjusted"] = num(value)
            elif column == "mean_completion_tokens" and isinstance(value, float | None):
                shown["tokens"] = num(value, 1)
            else:
                shown[column] = value
        rows.append(shown)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else frame


def render(frame: Any, fmt: Format, title: str = "") -> str:
    """A polars frame as a terminal table, CSV, JSON (records) or Markdown."""
    if fmt == "table":
        frame = for_terminal(frame)
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "json":
        return json.dumps(frame.to_dicts(), indent=2, default=str) + "\n"
    columns = frame.columns
    numeric = {c for c, dtype in frame.schema.items() if dtype.is_numeric()}
    rows = [[_cell(c, v) for c, v in zip(columns, row, strict=True)] for row in frame.iter_rows()]
    if fmt == "markdown":
        lines = [
            "| " + " | ".join(columns) + " |",
            "|" + "|".join("---" for _ in columns) + "|",
            *("| " + " | ".join(r) + " |" for r in rows),
        ]
        return (f"### {title}\n\n" if title else "") + "\n".join(lines) + "\n"
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None)
    for column in columns:
        right = column in numeric or column in _FORMATTED
        table.add_column(column, justify="right" if right else "left")
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=200, force_terminal=False).print(table)
    return buffer.getvalue()
