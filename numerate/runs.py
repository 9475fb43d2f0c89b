"""Naming runs the way people do: `latest`, `previous`, or a unique prefix of the id."""

from __future__ import annotations

from typing import Any, Protocol

from numerate.kernel.errors import ConfigError

__all__ = ["list_runs", "resolve_run"]


class Queryable(Protocol):
    path: str

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]: ...


class Framing(Queryable, Protocol):
    def frame(self, sql: str, params: Any = None) -> Any: ...


def resolve_run(source: Queryable, text: str | None, sweep: str | None = None) -> str:
    """The full run id that `text` names: `latest` (also when None) and `previous` by start time
    (within `sweep` when given), else the one run whose id starts with `text`. ConfigError names
    the text when no run or several runs match."""
    where, params = ("WHERE sweep_name = ?", [sweep]) if sweep else ("", [])
    if text is None or text in ("latest", "previous"):
        offset = 1 if text == "previous" else 0
        rows = source.query(
            f"SELECT run_id FROM runs {where} ORDER BY started_at DESC LIMIT 1 OFFSET {offset}",
            params,
        )
        if not rows:
            from numerate.store.journal import live_owners

            scope = f" of sweep {sweep!r}" if sweep else ""
            wanted = "previous run" if offset else "run"
            starting = (
                ": a run is starting to write it (try again in a few seconds)"
                if live_owners(source.path)
                else ""
            )
            raise ConfigError(f"{source.path} holds no {wanted}{scope} yet{starting}")
        return str(rows[0][0])
    text = text.strip()
    if not text:
        raise ConfigError("run id '': give an id, a unique prefix of one, latest or previous")
    rows = source.query(
        "SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY started_at DESC LIMIT 6",
        [text],
    )
    if not rows:
        raise ConfigError(f"run {text!r}: no run in {source.path} has an id starting so")
    if len(rows) > 1 and not any(r[0] == text for r in rows):
        ids = ", ".join(r[0] for r in rows[:5])
        raise ConfigError(f"run {text!r} is ambiguous: it starts {ids}; give more of the id")
    return str(rows[0][0]) if len(rows) == 1 else text


# The newest runs first, each with the models that answered in it or whose part was recorded
# (a model that failed before its first answer has only its run_models row).
_LIST_RUNS = """
WITH recent AS (
    SELECT * FROM runs {where} ORDER BY started_at DESC, run_id LIMIT ?
),
models AS (
    SELECT DISTINCT run_id, model FROM responses WHERE run_id IN (SELECT run_id FROM recent)
    UNION
    SELECT run_id, model FROM run_models WHERE run_id IN (SELECT run_id FROM recent)
),
answered AS (
    SELECT run_id, count(*) AS n FROM responses
    WHERE run_id IN (SELECT run_id FROM recent) GROUP BY run_id
)
SELECT r.run_id AS id, r.sweep_name AS sweep,
       coalesce((SELECT string_agg(m.model, ', ' ORDER BY m.model) FROM models m
                 WHERE m.run_id = r.run_id), '') AS models,
       r.status,
       date_trunc('second', r.started_at) AS started,
       date_trunc('second', r.finished_at) AS finished,
       coalesce(a.n, 0) AS n
FROM recent r LEFT JOIN answered a USING (run_id)
ORDER BY r.started_at DESC, r.run_id
"""


def list_runs(source: Framing, limit: int = 20, sweep: str | None = None) -> Any:
    """The newest runs first, as a polars frame: id, sweep, models (comma-separated), status,
    started, finished (times to the second) and n (answers stored).

    Args:
        source: a read-only connection (numerate.store.reader.Reader).
        limit: at most this many runs, >= 1.
        sweep: only the runs of this sweep.
    """
    if limit < 1:
        raise ConfigError(f"--limit {limit}: need at least 1")
    where, params = ("WHERE sweep_name = ?", [sweep]) if sweep else ("", [])
    return source.frame(_LIST_RUNS.format(where=where), [*params, limit])
