"""Naming runs the way people do: `latest`, `previous`, or a unique prefix of the id."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from numerate.kernel.errors import ConfigError, some_of
from numerate.store import browse, queries
from numerate.store.journal import live_owners
from numerate.store.queries import Source

if TYPE_CHECKING:
    import polars as pl

__all__ = ["list_runs", "numgen_runs_elsewhere", "resolve_run"]


def check_sweep_name(sweep: str | None) -> None:
    """ConfigError for an empty `--sweep` (it would mean every sweep)."""
    if sweep is not None and not sweep.strip():
        raise ConfigError(f"--sweep {sweep!r}: give a sweep name, or leave it out for every sweep")


def check_known_sweep(source: Source, sweep: str | None) -> None:
    """ConfigError for a --sweep the database holds no run of, naming those it holds (a
    typo listed nothing, or changed nothing); a database without a sweep's run says so (it
    listed nothing, exit 0)."""
    if sweep is None:
        return
    known = queries.sweep_names(source)
    if sweep not in known:
        shown = f"its sweeps: {some_of(known, 10)}" if known else "it holds no sweep's run"
        raise ConfigError(f"--sweep {sweep!r}: no run of that sweep ({shown})")


def numgen_runs_elsewhere(source: Source) -> str:
    """Where a database without language-model runs shows the NumGen runs it holds, as the end
    of a sentence ("holds no run yet" alone sent its user looking for a lost run); "" when it
    holds none."""
    path = shlex.quote(source.path)
    count = queries.numgen_run_count(source)
    if count:
        runs, them = ("run", "it") if count == 1 else ("runs", "them")
        shows = f"`numerate numgen report --db {path}` shows {them}"
        return f"; it holds {count} finished NumGen {runs}: {shows}"
    calibrations = queries.numgen_run_count(source, "calibration")
    if calibrations:
        return (
            f"; it holds {calibrations} detector calibration(s): {queries.calibrations_shown(path)}"
        )
    unfinished = sum(queries.numgen_run_count(source, kind, False)
                     for kind in ("benchmark", "calibration"))  # fmt: skip
    return f"; it holds {unfinished} NumGen run(s), none finished" if unfinished else ""


def refuse_blank(text: str, label: str) -> None:
    """ConfigError naming `label` when `text`, which should name a run, is empty or blank (a
    prefix of every run's id)."""
    if not text.strip():
        raise ConfigError(f"{label} {text!r}: give an id, a unique prefix of one, latest or "
                          "previous")  # fmt: skip


def resolve_run(source: Source, text: str | None, sweep: str | None = None) -> str:
    """The full run id that `text` names: `latest` (also when None) and `previous` by start time
    (within `sweep` when given), else the one run whose id starts with `text`. ConfigError names
    the text when no run or several runs match."""
    check_sweep_name(sweep)
    if text is not None:  # ` latest`, a pasted id with a newline: as meant
        refuse_blank(text, "run id")
        text = text.strip()
    if text is None or text in ("latest", "previous"):
        offset = 1 if text == "previous" else 0
        found = queries.latest_run_ids(source, sweep, offset)
        if found is None:
            scope = f" of sweep {sweep!r}" if sweep else ""
            wanted = "previous run" if offset else "run"
            starting = (
                ": a run is starting to write it (try again in a few seconds)"
                if live_owners(source.path)
                else ""
            )
            also = "" if sweep or starting else numgen_runs_elsewhere(source)
            raise ConfigError(f"{source.path} holds no {wanted}{scope} yet{starting}{also}")
        return found
    ids = queries.run_ids_starting(source, text)
    if not ids:
        numgen = queries.numgen_run_config(source, text) is not None
        also = "; it is a NumGen run's: `numerate numgen report` shows it" if numgen else ""
        raise ConfigError(f"run {text!r}: no run in {source.path} has an id that begins so{also}")
    if len(ids) > 1 and text not in ids:
        shown = some_of(ids, 5, whole=False)  # the first 6 a bounded query read
        raise ConfigError(f"run {text!r} is ambiguous: it starts {shown}; give more of the id")
    return ids[0] if len(ids) == 1 else text


def list_runs(source: Source, limit: int = 20, sweep: str | None = None) -> pl.DataFrame:
    """The newest runs first, as a polars frame: id, sweep, models (comma-separated), status
    (`stopped` for a run recorded running whose process is gone: numerate.store.queries.STOPPED),
    started, finished (times to the second) and n (answers stored).

    Args:
        source: a read-only connection (numerate.store.reader.Reader).
        limit: at most this many runs, >= 1 (more than a database can hold means all).
        sweep: only the runs of this sweep.
    """
    if limit < 1:
        raise ConfigError(f"--limit {limit}: need at least 1")
    check_sweep_name(sweep)
    return browse.runs_page(source, 0, min(limit, 2**63 - 1), sweep)[0]  # DuckDB's BIGINT
