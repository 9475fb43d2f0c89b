"""Reading the results without writing: `report`, `db`, `runs`, `compare` and `plot`.

A reader's connection is read-only and cannot touch any file outside the database (DuckDB's
`enable_external_access = false`, locked): no `COPY ... TO`, `EXPORT DATABASE`, `read_text`,
`ATTACH` or extension install. While a sweep writes, DuckDB lets no other process open the file,
not even read-only; the writing process then publishes a snapshot next to it
(`live_path`, see `numerate.store.LivePublisher`) and a reader opens that instead, saying so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel.errors import ConfigError
from numerate.schema import SCHEMA_VERSION

__all__ = ["Reader", "live_path"]

# Settings of every reader connection: nothing outside the database file can be reached.
READ_ONLY_CONFIG = {"enable_external_access": False, "lock_configuration": True}


def live_path(path: str) -> str:
    """Where the writing process publishes its snapshot: numerate.duckdb ->
    numerate.live.duckdb (any other name gets `.live.duckdb` appended)."""
    file = Path(path)
    if file.suffix == ".duckdb":
        return str(file.with_suffix(".live.duckdb"))
    return str(file) + ".live.duckdb"


def _connect(path: str) -> Any:
    import duckdb

    return duckdb.connect(path, read_only=True, config=dict(READ_ONLY_CONFIG))


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class Reader:
    """A read-only connection to a results database, or to its live snapshot while a sweep
    writes (then `live_age` is the snapshot's age in seconds)."""

    def __init__(self, path: str, con: Any, live_age: float | None = None) -> None:
        self.path = path
        self.con = con
        self.live_age = live_age

    @classmethod
    def open(cls, path: str, numerate_schema: bool = True) -> Reader:
        """Open `path` read-only. ConfigError, in the user's words, when it does not exist,
        cannot be read, is not a numerate database (when `numerate_schema`) or is locked by a
        writer that has not published a snapshot yet."""
        import duckdb

        if not Path(path).is_file():
            raise ConfigError(f"no results database at {path} (run `numerate run` first)")
        try:
            reader = cls(path, _connect(path))
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise ConfigError(f"cannot open {path}: {_first_line(error)}") from None
            reader = cls._open_live(path)
        except duckdb.Error as error:
            raise ConfigError(f"cannot open {path}: {_first_line(error)}") from None
        if numerate_schema:
            reader.check_schema()
        return reader

    @classmethod
    def _open_live(cls, path: str) -> Reader:
        import duckdb

        live = live_path(path)
        try:
            age = max(0.0, time.time() - Path(live).stat().st_mtime)
            return cls(path, _connect(live), live_age=age)
        except (OSError, duckdb.Error):
            raise ConfigError(
                f"{path} is being written by another process and has no live snapshot yet "
                f"({live} appears within seconds of a sweep's start): try again shortly"
            ) from None

    def check_schema(self) -> None:
        """ConfigError unless the database has numerate's current schema."""
        try:
            found = self.query("SELECT coalesce(max(version), 0) FROM schema_migrations")[0][0]
        except ConfigError:
            raise ConfigError(f"{self.path} is not a numerate results database") from None
        if found != SCHEMA_VERSION:
            upgrade = (
                "upgrade numerate"
                if found > SCHEMA_VERSION
                else f"`numerate upgrade --db {self.path}` brings it up to date, keeping every row"
            )
            raise ConfigError(
                f"{self.path} has schema version {found}, this numerate reads version "
                f"{SCHEMA_VERSION}: {upgrade}"
            )

    @property
    def note(self) -> str | None:
        """What a user should know about where the rows come from, or None."""
        if self.live_age is None:
            return None
        return (
            f"a sweep is writing {self.path}: showing its live snapshot, {self.live_age:.0f} s old"
        )

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        import duckdb

        try:
            return self.con.execute(sql, list(params or [])).fetchall()
        except duckdb.Error as error:
            raise ConfigError(_first_line(error)) from None

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """A query's result as a polars DataFrame (ConfigError with DuckDB's first line when
        the SQL fails)."""
        import duckdb
        import polars as pl

        try:
            relation = self.con.sql(sql, params=list(params or []))
            # duckdb 2.0: only relations have .pl(); a statement without rows gives None
            return pl.DataFrame() if relation is None else relation.pl()
        except duckdb.Error as error:
            raise ConfigError(_first_line(error)) from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
