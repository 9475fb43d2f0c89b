"""The words of DuckDB's that numerate.store.duckdb_words matches, pinned on the DuckDB that is
installed: each error is made for real and must be recognised (and the others must not)."""

import contextlib
import signal
import subprocess
import sys

import duckdb
import pytest

from numerate.store.duckdb_words import (
    LISTED,
    committed,
    is_cut_short_at_open,
    is_damaged,
    is_interrupted,
    is_lock_conflict,
    listed,
    out_of_memory,
)
from tests.draws import numerate_draws

HOLDS = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def test_a_database_another_process_holds_is_a_lock_conflict(tmp_path):
    db = tmp_path / "held.duckdb"
    duckdb.connect(str(db)).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDS, str(db)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(duckdb.Error) as refused:
            duckdb.connect(str(db))
    finally:
        holder.kill()
        holder.wait()
    assert is_lock_conflict(refused.value), str(refused.value)
    assert not is_interrupted(refused.value)


def test_a_block_that_fails_its_checksum_is_damage_and_bad_sql_is_not(tmp_path):
    whole = tmp_path / "whole.duckdb"
    with duckdb.connect(str(whole)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS i, 'row ' || range AS s FROM range(200000)")
        con.execute("CHECKPOINT")
    data = bytearray(whole.read_bytes())
    for block in range(1, (len(data) - 12288) // 262144):  # every block's content
        start = 12288 + 262144 * block + 50
        data[start : start + 64] = b"garbage!" * 8
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(bytes(data))
    with pytest.raises(duckdb.Error) as corrupt, duckdb.connect(str(damaged)) as con:
        con.execute("SELECT sum(i), max(s) FROM t").fetchall()
    assert is_damaged(corrupt.value), str(corrupt.value)
    with duckdb.connect(str(whole)) as con, pytest.raises(duckdb.Error) as bad_sql:
        con.execute("SELECT nope FROM t")
    assert not is_damaged(bad_sql.value) and not is_lock_conflict(bad_sql.value)
    assert not is_cut_short_at_open(corrupt.value) and not is_cut_short_at_open(bad_sql.value)
    cut = tmp_path / "cut.duckdb"  # it ends inside what DuckDB reads to open it
    cut.write_bytes(whole.read_bytes()[:100_000])
    with pytest.raises(duckdb.Error) as at_open:
        duckdb.connect(str(cut))
    assert is_cut_short_at_open(at_open.value), str(at_open.value)


QUERIES_UNTIL_INTERRUPTED = """
import signal, sys, duckdb
from numerate.store.duckdb_words import is_interrupted
con = duckdb.connect(config={"threads": 1})  # a Ctrl-C a worker thread of DuckDB's receives
print("querying", flush=True)  # stops the query only when it ends (measured: minutes here)
try:
    con.execute("SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3").fetchall()
except BaseException as stopped:  # no call before the name is kept: no Ctrl-C lands here
    first = stopped
while True:  # the Ctrl-Cs the test sent after the one that stopped the query
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        break
    except KeyboardInterrupt:
        continue
print(repr(first), is_interrupted(first), flush=True)
"""


def test_a_ctrl_c_during_a_query_is_an_interruption():
    """A Ctrl-C (sent until the query stops: DuckDB sees it at its next check, which a busy
    machine delays) ends DuckDB's query with the bindings' own error, which is_interrupted
    recognises; another RuntimeError it does not."""
    query = subprocess.Popen([sys.executable, "-c", QUERIES_UNTIL_INTERRUPTED],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert query.stdout.readline().strip() == "querying"
        while query.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                query.wait(timeout=1.0)  # inside the query by then; a Ctrl-C each second
            with contextlib.suppress(ProcessLookupError):
                query.send_signal(signal.SIGINT)
        said = query.stdout.read().strip()
    finally:
        query.kill()
        query.wait()
    assert said.endswith(" True"), said
    assert not is_interrupted(RuntimeError("a different failure"))


def test_many_strings_go_as_one_parameter_and_come_back_as_rows():
    ids = [f"objects-1-{i}" for i in range(2_000)] + ["", "a,b", "é ü"]
    con = duckdb.connect()
    assert [r[0] for r in con.execute(f"SELECT {LISTED}", [listed(ids)]).fetchall()] == ids
    assert con.execute(f"SELECT {LISTED}", [listed(["one"])]).fetchall() == [("one",)]
    for refused in ([], ["a\x1fb"], ["a", "b\x1f"]):
        with pytest.raises(ValueError, match="separator"):
            listed(refused)


def test_duckdb_past_its_bound_is_out_of_memory_in_the_words_a_checkpoint_gives_too():
    """A query past the bound with nowhere to spill says "Out of Memory Error: could not
    allocate block ..."; a checkpoint that fails the same way gives the words after the name as
    its "Original error" (an IO Error), so those words are pinned too."""
    con = duckdb.connect(config={"memory_limit": "16MB", "temp_directory": ""})
    with pytest.raises(duckdb.OutOfMemoryException) as raised:
        con.execute(
            "SELECT count(*) FROM (SELECT i, repeat('x', 200) AS s FROM range(2000000) t(i) "
            "ORDER BY s, i DESC)"
        ).fetchall()
    said = out_of_memory(raised.value)
    assert said is not None and said.startswith("Out of Memory Error: could not allocate block")
    words = said.removeprefix("Out of Memory Error: ")
    checkpoint = duckdb.IOException(
        "IO Error: Detached database 'r', but CHECKPOINT during DETACH failed. \nCheckpoint "
        f'failed for database "r". The database has been invalidated. Original error: {words}'
    )
    assert out_of_memory(checkpoint) == words
    corrupt = duckdb.IOException(
        "IO Error: Detached database 'r', but CHECKPOINT during DETACH failed. Original error: "
        "Corrupt database file: computed checksum 1 does not match stored checksum 2"
    )
    assert out_of_memory(corrupt) is None and is_damaged(corrupt)


def test_a_transaction_tried_again_draws_its_pause_from_no_one_elses_random_numbers():
    tries = []

    def attempt():
        tries.append(1)
        if len(tries) == 1:  # another writer's commit came first
            raise RuntimeError("TransactionContext Error: Failed to commit DuckLake transaction")
        return "written"

    with numerate_draws() as drawn:
        assert committed(attempt) == "written" and len(tries) == 2
    assert drawn == []


def test_a_parquet_file_cut_short_is_damaged_in_duckdbs_words(tmp_path):
    """A lake's data file cut short (its footer length, which the catalog knows, is pinned by
    tests/store/test_lake.py, where a lake reads one)."""
    from numerate.store.duckdb_words import is_corrupt

    whole = tmp_path / "whole.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT range AS a FROM range(1000)) TO '{whole}'")
    for cut in (0, 4, 100):
        part = tmp_path / f"cut{cut}.parquet"
        part.write_bytes(whole.read_bytes()[:cut])
        with pytest.raises(duckdb.Error) as raised:
            con.execute(f"SELECT count(*) FROM '{part}'").fetchall()
        assert is_corrupt(raised.value) and is_damaged(raised.value), raised.value
    with pytest.raises(duckdb.Error) as raised:
        con.execute("SELECT * FROM range(3) WHERE range::VARCHAR::INTEGER = 'x'").fetchall()
    assert not is_corrupt(raised.value)  # a query's own error
    with pytest.raises(duckdb.Error) as raised:  # a review: one quoting a value in those words
        con.execute("SELECT 'parse error: Invalid footer length'::INTEGER").fetchall()
    assert not is_corrupt(raised.value) and not is_damaged(raised.value), raised.value
