"""Reading results back: the leaderboard and per-manifold tables, in several formats."""

from __future__ import annotations

import html
import io
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, time
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from numerate.kernel.errors import ConfigError, fixed, printable
from numerate.results import live
from numerate.store import queries
from numerate.store.queries import Source

if TYPE_CHECKING:
    import polars as pl

Format = Literal["table", "csv", "json", "markdown"]

SUMMARY_COLUMNS = queries.SUMMARY_COLUMNS


def run_summaries(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> pl.DataFrame:
    """The run's summaries: per model over all manifolds (manifold '*'), then per manifold;
    only the given models and manifolds when any are given. The multi-sample figures only
    when some answer has several samples."""
    return single_sample_trimmed(live.summaries(source, run_id, models, manifolds))


def run_points(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> pl.DataFrame:
    """The run's grid points, filtered like run_summaries."""
    return single_sample_trimmed(live.points(source, run_id, models, manifolds))


def single_sample_trimmed(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame without the multi-sample columns when no row has more than one sample
    (pass@k, maj@k and consistency say nothing then)."""
    if "samples" not in frame.columns or (frame["samples"].fill_null(1) > 1).any():
        return frame
    return frame.drop([c for c in queries.MULTI_SAMPLE_COLUMNS if c in frame.columns])


def require_known(
    run_id: str, option: str, column: str, wanted: Sequence[str], known: Sequence[str]
) -> None:
    """ConfigError naming the first of `wanted` that is not among the run's `known` models or
    manifolds, and listing those it has (the check of report, compare and plot filters)."""
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
        require_known(run_id, option, column, wanted, live.summarised(source, run_id, column))


def run_state(source: Source, run_id: str) -> str | None:
    """A line for a run that is not finished (still running, degraded, failed...), else None."""
    run = queries.current_run(source, run_id)
    if run is None or run.status == "finished":
        return None
    if run.status == queries.STOPPED:
        if not run.answered:  # an empty table said nothing
            return (
                f"run {run_id} stopped without ending (started {run.started:%Y-%m-%d %H:%M}; "
                "its process is gone, killed or its machine down; the same command resumes "
                f"it) and {HOLDS_NO_ANSWER}"
            )
        return (
            f"run {run_id} stopped without ending (started {run.started:%Y-%m-%d %H:%M}; its "
            f"process is gone, killed or its machine down): the figures are of the "
            f"{run.answered:,} answers stored, and the same command resumes it with those it "
            "had received"
        )
    if run.status == "running":
        return (
            f"run {run_id} is still running (started {run.started:%Y-%m-%d %H:%M}, "
            f"{run.answered} answers so far): the figures are partial"
        )
    if not run.answered:
        return f"run {run_id} ended {run.status} and {HOLDS_NO_ANSWER}"
    if run.status == "interrupted":  # its figures are computed from what it had graded
        return (
            f"run {run_id} ended interrupted: the figures are of its {run.answered:,} answers "
            "(the same command resumes it)"
        )
    return f"run {run_id} ended {run.status}"


HOLDS_NO_ANSWER = "holds no answer: nothing to report"
"""How run_state ends for a run that stopped before any answer."""


def report_state(
    source: Source, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> str | None:
    """What `numerate report` says before its tables: ConfigError for a model or manifold the
    run does not have, or a run that stopped before any answer (an empty table, exit 0
    before); else run_state's line."""
    check_filters(source, run_id, models, manifolds)
    state = run_state(source, run_id)
    if state and state.endswith(HOLDS_NO_ANSWER):
        raise ConfigError(state)
    return state


def _markdown(cell: str) -> str:
    """A Markdown table cell: a `|` or a line break in a value would end the cell or the row;
    `&`, `<` and `>` are written as HTML's entities (a renderer that allows HTML in Markdown,
    MkDocs or pandoc, ran `<script>` in a grid value or an answer); a character a terminal
    acts on is written as its escape, as in the table (Markdown is read by people, often on
    the terminal it is printed to: a model's escape sequence set its title)."""
    lines = html.escape(cell, quote=False).replace("\r\n", "\n").split("\n")
    return "<br>".join(
        printable(line.replace("\\", "\\\\").replace("|", "\\|"), keep="\t") for line in lines
    )


def _visible(text: str) -> str:
    """`text` for a terminal: each character a terminal acts on or cannot show but a line
    break or a tab written as its escape (`\x1b`, `\u202e`): a model's answer holding an
    escape sequence set the terminal's title and cleared its screen when `numerate db`
    printed it."""
    return printable(text, keep="\n\t")


def _cell(column: str, value: Any) -> str:
    """A value of a report's table: a number to the digits it is read to, nothing as `-`."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return fixed(value, 1 if column == "mean_completion_tokens" else 3)
    return str(value)


def _queried(column: str, value: Any) -> str:
    """A value of a table someone's SQL made (`numerate db`): as it is, as CSV writes it (a
    float whole, not to 3 decimals: `1e-10` is not `0.000`; `true`; NULL said, where `-`
    could be a text)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


_RATES = {"unparsed_rate": "unparsed", "truncation_rate": "truncated", "error_rate": "errors"}
_FORMATTED = {"accuracy [95% CI]", "score [95% CI]", "adjusted", "tokens", *_RATES.values()}


def for_terminal(frame: Any) -> Any:
    """A frame made readable, every column kept in its place: accuracy with its interval in one
    column (when ci_low and ci_high are there), the score too (a manifold's: no interval),
    rates as percentages, tokens to one decimal."""
    import polars as pl

    columns = frame.columns
    interval = {"accuracy", "ci_low", "ci_high"}.issubset(columns)
    scored = {"score", "score_low", "score_high"}.issubset(columns)

    def num(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else fixed(value, digits)

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    rows = []
    for row in frame.iter_rows(named=True):
        shown: dict[str, Any] = {}
        for column in columns:
            value = row[column]
            if (interval and column in ("ci_low", "ci_high")) or (
                scored and column in ("score_low", "score_high")
            ):
                continue
            if scored and column == "score":
                bounds = (row["score_low"], row["score_high"])
                shown["score [95% CI]"] = num(value) + (
                    "" if None in bounds else f" [{num(bounds[0])}, {num(bounds[1])}]"
                )
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


def _finite(value: Any) -> Any:
    """`value` (records, lists, numbers) with each NaN or infinite float as the text "NaN",
    "Infinity" or "-Infinity": JSON has no such numbers (Python wrote them bare, which no JSON
    reader takes)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def render(frame: Any, fmt: Format, title: str = "", as_queried: bool = False) -> str:
    """A polars frame as a terminal table (made readable: `for_terminal`, unless it is shown
    `as_queried`, its columns as someone's SQL named them), CSV, JSON (records) or Markdown."""
    if fmt != "table":
        return "".join(rendered_in_parts([frame], fmt, title, as_queried))
    if not as_queried:
        frame = for_terminal(frame)
    columns = frame.columns
    numeric = {c for c, dtype in frame.schema.items() if dtype.is_numeric()}
    cell = _queried if as_queried else _cell
    rows = [[cell(c, v) for c, v in zip(columns, row, strict=True)] for row in frame.iter_rows()]
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(_visible(title)) if title else None)  # a run id: data, not markup
    for column in columns:
        right = column in numeric or column in _FORMATTED
        table.add_column(_visible(column), justify="right" if right else "left")
    for row in rows:  # as text, not rich markup: a model's `[red]` is its own answer
        table.add_row(*(Text(_visible(cell)) for cell in row))
    buffer = io.StringIO()
    Console(file=buffer, width=200, force_terminal=False).print(table)
    return buffer.getvalue()


def rendered_in_parts(
    frames: Iterable[Any], fmt: Format, title: str = "", as_queried: bool = False
) -> Iterator[str]:
    """Polars frames of one table's rows, one after another, as CSV, JSON (records) or
    Markdown, a frame at a time: the text `render` writes of them all, in parts, so that what
    is in memory is a frame's rows, not the table's (`numerate db` writes a result larger
    than memory so). The first frame gives the columns, also when it has no row. A table
    someone's SQL made (`as_queried`) has its Markdown values as they are, not as a report
    rounds them."""
    cell = _queried if as_queried else _cell
    opened = headed = False  # JSON's [ written; the columns given
    for frame in frames:
        if not frame.width and fmt != "json":  # a frame without a column (a query of none):
            continue  # no CSV line, no Markdown table of no column
        if fmt == "csv":
            yield _times_as_iso(frame).write_csv(include_header=not headed)
        elif fmt == "json" and frame.height:
            records = _finite(frame.to_dicts())
            text = json.dumps(records, indent=2, default=_text, allow_nan=False)
            yield (",\n" if opened else "[\n") + text[2:-2]  # its records, without [ and ]
            opened = True
        elif fmt == "markdown":
            columns = frame.columns
            if not headed:
                heading = f"### {printable(title)}\n\n" if title else ""
                names = " | ".join(map(_markdown, columns))
                yield f"{heading}| {names} |\n|{'|'.join('---' for _ in columns)}|\n"
            yield "".join(
                "| " + " | ".join(_markdown(cell(c, v)) for c, v in zip(columns, row, strict=True))
                + " |\n" for row in frame.iter_rows()
            )  # fmt: skip
        headed = True
    if fmt == "json":
        yield "\n]\n" if opened else "[]\n"


class Table(NamedTuple):
    """One table of a command's output: its key in a JSON object of several tables, its title
    above it in a terminal or Markdown, and its rows."""

    key: str
    title: str
    frame: Any


def summary_table(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> Table:
    """A run's summaries per model and manifold (`run_summaries`), titled with its id: the
    first table of `numerate report`, and what `numerate run` shows as it ends."""
    return Table("summaries", f"run {run_id}", run_summaries(source, run_id, models, manifolds))


def render_tables(tables: Sequence[Table], fmt: Format, keyed: bool) -> str:
    """Tables one after another for a reader (a terminal, Markdown); for a program one
    document: a JSON object of arrays keyed by table when `keyed` (the command was asked for
    what may be several tables: the same shape however many came), else the one table's
    JSON array or CSV (`one_table` refuses CSV of several before they are read)."""
    if fmt == "json" and keyed:
        document = {t.key: _finite(t.frame.to_dicts()) for t in tables}
        return json.dumps(document, indent=2, default=_text, allow_nan=False) + "\n"
    return "".join(render(t.frame, fmt, title=t.title) for t in tables)


def one_table(fmt: Format, asked: Sequence[str]) -> None:
    """ConfigError when `fmt` is CSV and the options `asked` add tables to the first: CSV has
    no way to hold several apart (four back to back were read as one)."""
    if fmt == "csv" and asked:
        raise ConfigError(
            f"--format csv holds one table, and {' '.join(asked)} adds more: give --format json "
            "(one object, a key per table), or leave them out"
        )


def _text(value: Any) -> str:
    """A value JSON has no type for, as text: a time in ISO 8601 (`2026-12-01T03:54:30+00:00`,
    as `_times_as_iso` writes it in CSV), anything else as Python writes it."""
    return value.isoformat() if isinstance(value, date | time) else str(value)


def _times_as_iso(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with each time column as ISO 8601 text, as `_text` writes it in JSON (polars'
    CSV wrote `2026-12-01T03:54:30.000000+0000`, and JSON `2026-12-01 03:54:30+00:00`)."""
    import polars as pl

    times = {
        name: "%Y-%m-%dT%H:%M:%S%.f" + ("%:z" if dtype.time_zone else "")
        for name, dtype in frame.schema.items()
        if isinstance(dtype, pl.Datetime)
    }
    return frame.with_columns(pl.col(name).dt.strftime(f) for name, f in times.items())


def tier_tables(source: Source, run_id: str, fmt: Format) -> list[Table]:
    """`numerate report --tiers`: each model's score with its interval and overall tier, the
    tiers per scope, and the paired comparisons they come from (none when the run has no
    scored answer). For csv and json the figures as they are, for programs."""
    import polars as pl

    from numerate.results.compare import estimate_text  # scipy: with the tiers only
    from numerate.results.standing import standing  # numpy's bootstrap, scipy's tests

    found = standing(source, run_id)
    if found.scores.is_empty():
        return []
    scores_title = (
        "score: chance-adjusted, truncation-penalised, geometric mean over manifolds "
        "(docs/statistics.md)"
    )
    tiers_title = "tiers: no two models of a tier differ (paired exact McNemar, Holm per scope)"
    pairs_title = "pairs: the same cases answered by both models"
    if fmt in ("csv", "json"):
        return [
            Table("scores", scores_title, found.scores),
            Table("tiers", tiers_title, found.tiers),
            Table("pairs", pairs_title, found.pairs),
        ]
    scores = found.scores.select(
        "model",
        pl.struct("score", "ci_low", "ci_high")
        .map_elements(lambda s: estimate_text(s["score"], s["ci_low"], s["ci_high"]), pl.String)
        .alias("score [95% CI]"),
        pl.exclude("model", "score", "ci_low", "ci_high"),
    )
    shown = [Table("scores", scores_title, scores), Table("tiers", tiers_title, found.tiers)]
    if found.pairs.height:
        pairs = found.pairs.select(
            "scope", "base_model", "new_model", "n",
            pl.struct("difference", "difference_low", "difference_high").map_elements(
                lambda d: estimate_text(d["difference"], d["difference_low"],
                                        d["difference_high"], signed=True), pl.String,
            ).alias("new - base [95% CI]"),
            "p_holm", "detectable_difference",
            pl.when("differ").then(pl.lit("differ")).otherwise(pl.lit("no difference"))
            .alias("verdict"),
        )  # fmt: skip
        shown.append(Table("pairs", pairs_title, pairs))
    return shown
