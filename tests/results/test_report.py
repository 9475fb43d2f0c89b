"""Writing a table as CSV, JSON or Markdown a part at a time (`numerate db` streams a result
larger than memory so) gives the text of the whole table."""

import io
import itertools
import json
import math

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from numerate.results.report import render, rendered_in_parts

ROWS = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40),
        st.none() | st.text(max_size=8),
        st.floats(allow_nan=True, allow_infinity=True),
    ),
    max_size=12,
)


def frame_of(rows):
    columns = ("n", "text", "x")
    data = {c: [row[i] for row in rows] for i, c in enumerate(columns)}
    return pl.DataFrame(data, schema={"n": pl.Int64, "text": pl.String, "x": pl.Float64})


@given(ROWS, st.lists(st.integers(0, 12), max_size=4), st.sampled_from(["csv", "json", "markdown"]))
def test_a_table_written_in_parts_is_the_table_written_whole(rows, cuts, fmt):
    whole = frame_of(rows)
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    parts = [whole.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    written = "".join(rendered_in_parts(parts, fmt, as_queried=True))
    assert written == render(whole, fmt, as_queried=True)
    if fmt == "json":  # and it is the rows, NaN and infinities as their names
        names = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        read = [(r["n"], r["text"], names.get(r["x"], r["x"])) for r in json.loads(written)]
        assert frame_of(read).equals(whole, null_equal=True)
    if fmt == "csv":
        assert written.startswith("n,text,x\n") and written.splitlines().count("n,text,x") == 1
        read = pl.read_csv(io.StringIO(written), schema=whole.schema)
        assert read.height == whole.height and read["n"].to_list() == whole["n"].to_list()
    if fmt == "markdown":
        assert written.splitlines().count("|---|---|---|") == 1  # the columns once, in parts or not


def test_an_empty_table_in_parts_keeps_its_columns():
    empty = frame_of([])
    assert "".join(rendered_in_parts([empty, empty], "csv")) == "n,text,x\n"
    assert "".join(rendered_in_parts([empty], "json")) == "[]\n"
    assert "".join(rendered_in_parts([empty, frame_of([(1, "a", 0.5)])], "json")) == (
        '[\n  {\n    "n": 1,\n    "text": "a",\n    "x": 0.5\n  }\n]\n'
    )
    assert "".join(rendered_in_parts([empty], "markdown")) == "| n | text | x |\n|---|---|---|\n"
