"""What a reader lets the user's SQL call (numerate.store.reader.called): the names DuckDB's
own tokenizer puts before an opening parenthesis, and none inside a string or a comment."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.store.duckdb_words import sql_literal
from numerate.store.reader import called


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELECT count(*) FROM ducklake_merge_adjacent_files('l')",
         ["count", "ducklake_merge_adjacent_files"]),
        ("SELECT 'ééé', query('SELECT 1')", ["query"]),  # positions past text of 2 bytes
        ('FROM main."QUERY" /* a comment */ (1)', ["query"]),  # qualified, quoted, in capitals
        ('SELECT "a""b"(1)', ['a"b']),
        ("EXPLAIN ANALYZE SELECT * FROM checkpoint()", ["checkpoint"]),
        ("SELECT 1 AS query -- query(\n", []),
        ("SELECT 'query(' AS checkpoint, $$postgres_query($$ AS q", []),
        ("SELECT * FROM runs", []),
    ],
)  # fmt: skip
def test_the_functions_a_query_calls_are_named(sql, names):
    assert list(called(sql)) == names


NAMES = st.from_regex(r"[a-z_][a-z0-9_$]{0,20}", fullmatch=True)


@given(st.text(max_size=40), NAMES)
def test_a_name_in_a_string_is_no_call_and_a_name_before_a_parenthesis_is(text, name):
    quoted = sql_literal(text)
    assert list(called(f"SELECT {quoted} AS x, {sql_literal(name + '(')}")) == []
    assert list(called(f'SELECT {quoted}, "{name}" ({quoted})')) == [name]
