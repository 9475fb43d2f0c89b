"""Long texts in pieces: an answer or a reasoning longer than ROW_BYTES is stored as pieces of
PIECE_CHARS characters in the table `texts`, keyed by the SHA-256 of the whole text; its row
keeps a preview (its first PREVIEW_HEAD and last PREVIEW_TAIL characters around
numerate.kernel.answers.SEAM) and the SHA-256 (`raw_sha`, `text_sha`, `reasoning_sha`).

Why: DuckDB 1.5.5 keeps a text of more than 4,096 bytes apart from its column's block (an
overflow string) and holds those of the rows a statement reads or writes together in memory.
With the 128 MB numerate lets the writer's DuckDB hold (numerate.store.writer.WRITER_MEMORY),
a sweep of a model answering 60,000 characters beside a reasoning as long stopped after about
1,600 answers; rows of texts cut to 16 KB stopped it at 6,000, and rows cut to 32 KB were
stored but could not be published (a run's shards). A piece, and a row's preview, is
at most 4,000 bytes: never an overflow string (docs/schema.md, "Answers of any size").

Every write of completions and responses splits their long texts here (`pieces_of` and
`rows_split`, in the statements that merge the rows, whatever their source: this process's
journal, an ingested shard); every read of a whole text joins its pieces here (`whole_texts`,
or SQL of the same join for a page of the viewer). Rows stored before schema 17 keep their
texts whole in the row (their SHA-256 NULL), and are read as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from numerate.kernel.answers import SEAM
from numerate.store.duckdb_words import LISTED, listed

__all__ = [
    "LONG_TEXTS",
    "PIECE_CHARS",
    "PIECE_COLUMNS",
    "ROW_BYTES",
    "pieces_of",
    "previews_made",
    "rows_split",
    "unreferenced_pieces",
    "whole_texts",
]

ROW_BYTES = 4_000
"""The most bytes (UTF-8) of a text a row holds whole: DuckDB keeps a text of more than 4,096
bytes apart from its block (an overflow string), and holds every such text of the rows a
statement reads or writes at once."""

PIECE_CHARS = 1_000
"""Characters of a piece (the last one of a text fewer): at most 4,000 bytes, whatever they
are."""

PREVIEW_HEAD = 250
"""Characters of a long text's beginning its row keeps."""

PREVIEW_TAIL = 700
"""Characters of a long text's end its row keeps (with PREVIEW_HEAD and SEAM: at most 3,838
bytes)."""

PIECE_COLUMNS = ("sha", "part", "piece")
"""The columns of `texts`, as `pieces_of` gives them."""

LONG_TEXTS: dict[str, tuple[tuple[str, str], ...]] = {
    "completions": (("text", "text_sha"), ("reasoning", "reasoning_sha")),
    "responses": (("raw_text", "raw_sha"), ("reasoning", "reasoning_sha")),
}
"""The tables whose texts may be long: each text column and the column of its SHA-256."""

_SEAM = SEAM.replace("'", "''")


def _long(column: str) -> str:
    return f'strlen("{column}") > {ROW_BYTES}'


def _preview(column: str) -> str:
    return f'left("{column}", {PREVIEW_HEAD}) || \'{_SEAM}\' || right("{column}", {PREVIEW_TAIL})'


def pieces_of(table: str, source: str, names: Sequence[str] | None = None) -> str:
    """SQL: the pieces (sha, part, piece) of the long texts of `source`'s rows (a relation
    with `table`'s text columns), a text's pieces once however many rows hold it (each text
    held once, while it is cut: a row per piece that held the whole text ran out of 128 MB
    for a hundred answers of 120 KB)."""
    texts = " UNION ALL ".join(
        f'SELECT "{column}" AS t FROM {source} WHERE {_long(column)}'
        for column, _ in LONG_TEXTS[table]
        if names is None or column in names
    )
    once = f"SELECT sha256(t) AS sha, any_value(t) AS t FROM ({texts}) GROUP BY ALL"
    parts = f"range(CAST(ceil(length(t) / {PIECE_CHARS}) AS BIGINT))"
    return (  # the pieces made as a list of the text's row, so no row holds the whole text
        f"SELECT sha, CAST(unnest({parts}) AS INTEGER) AS part, unnest(list_transform({parts}, "
        f"i -> substring(t, i * {PIECE_CHARS} + 1, {PIECE_CHARS}))) AS piece FROM ({once})"
    )


def rows_split(table: str, source: str, names: Sequence[str]) -> tuple[str, list[str]]:
    """SQL: `source`'s rows (columns `names`) as `table` stores them: a long text as its
    preview, with its SHA-256 (a row that holds a preview already keeps the SHA-256 it has);
    and the columns it gives: `names`, then the SHA-256s of their text columns."""
    texts = [(column, sha) for column, sha in LONG_TEXTS[table] if column in names]
    shas = {sha for _, sha in LONG_TEXTS[table]}
    previewed = dict(texts)
    out = [
        f'CASE WHEN {_long(name)} THEN {_preview(name)} ELSE "{name}" END AS "{name}"'
        if name in previewed
        else f'"{name}"'
        for name in names
        if name not in shas
    ]
    for column, sha in texts:
        kept = f'"{sha}"' if sha in names else "CAST(NULL AS VARCHAR)"
        out.append(f'CASE WHEN {_long(column)} THEN sha256("{column}") ELSE {kept} END AS "{sha}"')
    columns = [*(name for name in names if name not in shas), *(sha for _, sha in texts)]
    return f"SELECT {', '.join(out)} FROM {source}", columns


def previews_made(table: str) -> list[str]:
    """SQL: the statements that turn the long texts `table`'s rows hold whole (a shard
    published before schema 17, loaded as it was) into previews with their SHA-256 (their
    pieces stored first: `pieces_of(table, table)`)."""
    return [
        f'UPDATE {table} SET "{sha}" = sha256("{column}"), "{column}" = {_preview(column)} '
        f"WHERE {_long(column)}"
        for column, sha in LONG_TEXTS[table]
    ]


def whole_texts(
    query: Callable[[str, list[Any]], list[tuple[Any, ...]]], shas: Iterable[str | None]
) -> dict[str, str]:
    """The whole texts of these SHA-256 (those stored), joined from their pieces in Python
    (DuckDB handles pieces only); `query` runs SQL with parameters where they are stored."""
    wanted = sorted({sha for sha in shas if sha})
    if not wanted:
        return {}
    pieces: dict[str, dict[int, str]] = {}
    rows = query(  # found by row id: DuckDB then reads the pieces of those rows' row groups
        "SELECT sha, part, piece FROM texts WHERE rowid IN (SELECT rowid FROM texts WHERE sha "
        f"IN (SELECT {LISTED}))",  # only, not every piece (a text of 100: 385 ms, now 20)
        [listed(wanted)],
    )
    for sha, part, piece in rows:
        pieces.setdefault(sha, {})[part] = piece
    return {sha: "".join(parts[i] for i in sorted(parts)) for sha, parts in pieces.items()}


def unreferenced_pieces() -> str:
    """SQL: delete the pieces no row names (after rows were deleted)."""
    named = " UNION ALL ".join(
        f"SELECT {sha} FROM {table} WHERE {sha} IS NOT NULL"
        for table, columns in LONG_TEXTS.items()
        for _, sha in columns
    )
    return f"DELETE FROM texts WHERE sha NOT IN ({named})"
