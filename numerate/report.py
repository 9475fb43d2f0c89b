"""Reading results back: the leaderboard and per-manifold tables, in several formats."""

from __future__ import annotations

import io
import json
from typing import Any, Literal

from numerate.store import Store

Format = Literal["table", "csv", "json", "markdown"]

SUMMARY_COLUMNS = (
    "model", "manifold", "n", "n_scored", "accuracy", "ci_low", "ci_high", "chance",
    "chance_adjusted", "unparsed_rate", "truncation_rate", "error_rate", "mean_completion_tokens",
)  # fmt: skip


def latest_run(store: Store) -> str | None:
    rows = store.query("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")
    return rows[0][0] if rows else None


def run_summaries(store: Store, run_id: str) -> Any:
    """The run's summaries: per model over all manifolds (manifold '*'), then per manifold."""
    names = ", ".join(SUMMARY_COLUMNS)
    return store.frame(
        f"SELECT {names} FROM summaries WHERE run_id = ? "
        "ORDER BY model, (manifold = '*') DESC, manifold",
        [run_id],
    )


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if column == "mean_completion_tokens" else f"{value:.3f}"
    return str(value)


_SUMMARY_FIELDS = {
    "accuracy", "ci_low", "ci_high", "chance_adjusted", "unparsed_rate", "truncation_rate",
    "error_rate",
}  # fmt: skip


def for_terminal(frame: Any) -> Any:
    """Summary columns made readable: accuracy with its interval, rates as percentages."""
    import polars as pl

    if not _SUMMARY_FIELDS.issubset(frame.columns):
        return frame  # not a summary (e.g. the result of a user's SQL): shown as it is

    def num(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    rows = []
    for row in frame.iter_rows(named=True):
        shown = {k: row[k] for k in ("model", "manifold", "point_key", "n") if k in row}
        shown["accuracy [95% CI]"] = (
            f"{num(row['accuracy'])} [{num(row['ci_low'])}, {num(row['ci_high'])}]"
        )
        if "chance" in row:
            shown["chance"] = num(row["chance"])
        shown["adjusted"] = num(row["chance_adjusted"])
        shown["unparsed"] = pct(row["unparsed_rate"])
        shown["truncated"] = pct(row["truncation_rate"])
        shown["errors"] = pct(row["error_rate"])
        if "mean_completion_tokens" in row:
            shown["tokens"] = num(row["mean_completion_tokens"], 1)
        rows.append(shown)
    return pl.DataFrame(rows) if rows else frame


def render(frame: Any, fmt: Format, title: str = "") -> str:
    """A polars frame as a terminal table, CSV, JSON (records) or Markdown."""
    if fmt == "table":
        frame = for_terminal(frame)
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "json":
        return json.dumps(frame.to_dicts(), indent=2, default=str) + "\n"
    columns = frame.columns
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
        table.add_column(column, justify="left" if column in ("model", "manifold") else "right")
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=200, force_terminal=False).print(table)
    return buffer.getvalue()
