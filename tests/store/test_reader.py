"""What a reader lets the user's SQL call (numerate.store.reader): the functions DuckDB's own
parser finds in the query (`called`: none inside a string, a comment, or a list of column
names), and of the table functions only those known to read (READING)."""

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.store import lake
from numerate.store.duckdb_words import sql_literal
from numerate.store.reader import READING, called

DO_MORE = frozenset({
    # DuckDB's own: write the database or files (checkpoints, logs, profiles), run SQL given
    # as text, read Python's or Arrow's objects by address
    "checkpoint", "force_checkpoint", "enable_logging", "disable_logging",
    "truncate_duckdb_logs", "enable_profiling", "disable_profiling", "query", "query_table",
    "json_execute_serialized_sql", "arrow_scan", "arrow_scan_dumb", "pandas_scan",
    "python_map_function", "seq_scan",
    # DuckLake's maintenance and writes (files in the lake's data folder)
    "ducklake_add_data_files", "ducklake_cleanup_old_files", "ducklake_commit",
    "ducklake_delete_orphaned_files", "ducklake_expire_snapshots", "ducklake_flush_inlined_data",
    "ducklake_merge_adjacent_files", "ducklake_rewrite_data_files", "ducklake_scan",
    "ducklake_set_commit_message", "ducklake_set_option",
    # PostgreSQL's: any server, with the lake's role
    "pg_clear_cache", "postgres_attach", "postgres_configure_pool", "postgres_execute",
    "postgres_query", "postgres_scan", "postgres_scan_pushdown", "read_postgres_binary",
})  # fmt: skip
"""The table functions a reader refuses, each known to do more than read."""


@pytest.fixture(scope="module")
def con():
    with duckdb.connect() as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
        yield connection


def table_functions(connection):
    listed = "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type IN "
    return {n for (n,) in connection.execute(listed + "('table', 'table_macro')").fetchall()}


def test_every_table_function_is_known_to_read_or_refused():
    """A DuckDB or an extension upgraded adds table functions: each is refused (not in
    READING) until someone reads what it does and puts it in one list or the other."""
    with duckdb.connect() as connection:
        lake.load_extensions(connection)
        found = table_functions(connection)
    assert not READING & DO_MORE
    assert found - READING - DO_MORE == set(), "read what these do, then classify them"
    assert {"query", "checkpoint", "enable_logging", "postgres_query"} <= found - READING


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELECT count(*) FROM ducklake_merge_adjacent_files('l')",
         {"count_star", "ducklake_merge_adjacent_files"}),
        ("SELECT 'ééé', query('SELECT 1')", {"query"}),
        ('FROM main."QUERY" /* a comment */ (1)', {"query"}),  # qualified, quoted, in capitals
        ("SELECT * FROM range(3), (SELECT * FROM t WHERE a IN (SELECT a FROM checkpoint()))",
         {"range", "checkpoint"}),  # in a subquery's subquery
        ("SUMMARIZE SELECT * FROM read_text('x')", {"read_text"}),
        ("SELECT sum(a) OVER (), abs(a) FROM t", {"sum", "abs"}),  # a window's too
        ("SELECT 1 AS query -- query(\n", set()),
        ("SELECT 'query(' AS checkpoint, $$postgres_query($$ AS q", set()),
        # a common table expression's and an alias's column lists are no calls
        ("WITH query(n) AS (SELECT a FROM t) SELECT n FROM query", set()),
        ("SELECT c.x FROM t AS checkpoint(x) JOIN t AS c(x) USING (x)", set()),
        ("SELECT * FROM runs", set()),
    ],
)  # fmt: skip
def test_the_functions_a_query_calls_are_named(con, sql, names):
    assert called(con, sql) == names


def test_what_duckdb_cannot_tell_is_none(con):
    assert called(con, "PRAGMA table_info('t')") is None  # a PRAGMA as written, not rewritten
    [rewritten] = con.extract_statements("PRAGMA table_info('t')")
    assert called(con, rewritten.query) == {"pragma_table_info"}


NAMES = st.from_regex(r"[a-z_][a-z0-9_$]{0,20}", fullmatch=True)


@given(st.text(max_size=40), NAMES)
def test_a_name_in_a_string_is_no_call_and_a_function_in_from_is(text, name):
    quoted = sql_literal(text.replace("\0", ""))
    with duckdb.connect() as connection:
        assert called(connection, f"SELECT {quoted} AS x, {sql_literal(name + '(')}") == set()
        assert called(connection, f'SELECT * FROM "{name}" ({quoted})') == {name}
