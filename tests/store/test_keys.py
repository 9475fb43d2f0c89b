"""Keyed writes without primary keys (numerate.store.schema.KEYS): a row written again (a
resumed run, a journal replayed, a shard ingested twice) is one row, the first or the last
copy as its table says; and databases of schema version 8 (with primary keys) upgrade with
their rows."""

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from numerate.store import Store
from numerate.store.schema import KEYS, SCHEMA_VERSION, SHARD_TABLES
from numerate.store.tables import insert_rows
from tests.store.old_schema import database_at_version

SAMPLE = {
    "VARCHAR": "v",
    "JSON": "{}",
    "INTEGER": 1,
    "BIGINT": 1,
    "UBIGINT": 1,
    "DOUBLE": 0.5,
    "FLOAT": 0.5,
    "BOOLEAN": False,
    "TIMESTAMP WITH TIME ZONE": datetime(2026, 1, 1, tzinfo=UTC),
}


def columns_of(con, table):
    return con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = "
        "current_database() AND table_name = ? ORDER BY column_index",
        [table],
    ).fetchall()


def marked_column(table, columns):
    """A text column outside the key, whose value tells the copies of one row apart."""
    key = KEYS[table][0]
    return next(name for name, kind in columns if kind == "VARCHAR" and name not in key)


def row(columns, table, key_value, mark):
    values = {name: SAMPLE[kind] for name, kind in columns}
    values.update({name: key_value for name, kind in columns
                   if name in KEYS[table][0] and kind == "VARCHAR"})  # fmt: skip
    values[marked_column(table, columns)] = mark
    return values


def stored_a_and_b(con, table):
    """Rows "a" and "b" of `table` stored (marked "stored a", "stored b"): its columns, their
    names and its marked column."""
    columns = columns_of(con, table)
    names = [name for name, _ in columns]
    insert_rows(con, table, names, [row(columns, table, "a", "stored a"),
                                    row(columns, table, "b", "stored b")])  # fmt: skip
    return columns, names, marked_column(table, columns)


@pytest.mark.parametrize("table", sorted(KEYS))
def test_a_row_written_again_is_one_row_the_first_or_the_last_as_its_table_keeps(tmp_path, table):
    store = Store.open(str(tmp_path / "keys.duckdb"))
    with store.session() as con:
        columns, names, mark = stored_a_and_b(con, table)
        insert_rows(con, table, names, [row(columns, table, "a", "a again"),
                                        row(columns, table, "c", "first c"),
                                        row(columns, table, "a", "a once more"),
                                        row(columns, table, "c", "last c")])  # fmt: skip
        insert_rows(con, table, names, [])
        key = KEYS[table][0][0]
        stored = con.execute(f'SELECT "{key}", "{mark}" FROM {table} ORDER BY 1').fetchall()
    if KEYS[table][1] == "first":
        assert stored == [("a", "stored a"), ("b", "stored b"), ("c", "first c")]
    else:
        assert stored == [("a", "a once more"), ("b", "stored b"), ("c", "last c")]


@pytest.mark.parametrize("table", sorted(SHARD_TABLES))
def test_a_table_written_from_another_database_keeps_the_first_or_the_last_page_by_page(
    tmp_path, monkeypatch, table
):
    """`insert_table` (an ingest's graded run into the database) keeps rows as `insert_rows`
    does, over pages of its own (two here)."""
    import pyarrow as pa

    from numerate.store import tables

    monkeypatch.setattr(tables, "TABLE_PAGE_ROWS", 2)
    store = Store.open(str(tmp_path / "keys.duckdb"))
    with store.session() as con:
        columns, _, mark = stored_a_and_b(con, table)
        con.execute(f"ATTACH ':memory:' AS other; CREATE TABLE other.main.{table} AS "
                    f"FROM {table} LIMIT 0")  # fmt: skip
        given = pa.Table.from_pylist([row(columns, table, k, f"new {k}") for k in "acde"])
        con.register("given", given)
        con.execute(f"INSERT INTO other.main.{table} BY NAME SELECT * FROM given")
        tables.insert_table(con, table, f"other.main.{table}")
        key = KEYS[table][0][0]
        stored = con.execute(f'SELECT "{key}", "{mark}" FROM {table} ORDER BY 1').fetchall()
        con.execute("DETACH other")
    Store.close_all()
    first = "stored a" if KEYS[table][1] == "first" else "new a"
    assert stored == [("a", first), ("b", "stored b"), *((k, f"new {k}") for k in "cde")]


def test_no_table_has_a_primary_key_or_an_index(tmp_path):
    """An index as large as the data, rewritten at each checkpoint: a million-case sweep's
    cost grew with the square of its size (docs/benchmarks.md, "Scale"); and a DuckLake
    refuses primary keys, so the same tables serve both."""
    store = Store.open(str(tmp_path / "plain.duckdb"))
    constrained = store.query(
        "SELECT table_name FROM duckdb_constraints() WHERE database_name = current_database() "
        "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') ORDER BY 1"
    )
    assert constrained == []
    assert store.query("SELECT count(*) FROM duckdb_indexes() WHERE database_name = "
                       "current_database()") == [(0,)]  # fmt: skip
    store.close()


def test_a_version_8_database_keeps_its_rows_and_its_keys_hold_after_the_upgrade(tmp_path):
    path = str(tmp_path / "v8.duckdb")
    con = database_at_version(path, 8)
    before = {}
    present = {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    for table in sorted(present & set(KEYS)):  # `texts` came with schema 17
        columns = columns_of(con, table)
        names = [name for name, _ in columns]
        old = pa.Table.from_pylist([row(columns, table, k, f"old {k}") for k in "ab"])
        con.register("old", old)
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM old")  # as version 8 wrote
        con.unregister("old")
        listed = ", ".join(f'"{name}"' for name in sorted(names))  # by name: the order may move
        before[table] = (
            listed,
            con.execute(f"SELECT {listed} FROM {table} ORDER BY ALL").fetchall(),
        )
    con.close()
    store = Store(path)
    assert store.query("SELECT max(version) FROM schema_migrations") == [(SCHEMA_VERSION,)]
    with store.session() as con:
        for table, (listed, rows) in before.items():
            assert con.execute(f"SELECT {listed} FROM {table} ORDER BY ALL").fetchall() == rows
            columns = columns_of(con, table)
            names = [name for name, _ in columns]
            nullable = dict(con.execute(
                "SELECT column_name, is_nullable FROM duckdb_columns() WHERE "
                "database_name = current_database() AND table_name = ?", [table]
            ).fetchall())  # fmt: skip
            assert not any(nullable[c] for c in KEYS[table][0])  # the key is never NULL
            insert_rows(con, table, names, [row(columns, table, "a", "new a")])
            assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == [(2,)]
    store.close()
