"""A database as an earlier numerate left it: the first migrations only, recorded."""

import duckdb

from numerate.store import now
from numerate.store.schema import MIGRATIONS


def database_at_version(path: str, version: int) -> duckdb.DuckDBPyConnection:
    """A new database at schema `version` (its first `version` migrations), open."""
    con = duckdb.connect(path)
    con.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
        "description VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    for number, (description, sql) in enumerate(MIGRATIONS[:version], start=1):
        con.execute(sql)
        con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [number, description, now()])
    return con
