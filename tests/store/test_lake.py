"""A results database that is a DuckLake on PostgreSQL (numerate.store.lake): its name, keyed
writes that never duplicate a row, and the same figures as a file for the same sweep. The
tests that need PostgreSQL start their own (tests/postgres.py) or are skipped, saying why."""

import json
import os
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from numerate.cli import app
from numerate.store import Store, lake
from numerate.store import lake as lake_module
from numerate.store.reader import Reader
from numerate.store.schema import (
    JOURNALED,
    KEYS,
    SCHEMA_VERSION,
    StoreError,
    StoreFailedForNow,
    now,
)
from numerate.store.tables import insert_rows
from tests.store.test_keys import columns_of, marked_column, row

runner = CliRunner()


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("ducklake:sqlite:lake.db", "a lake's catalog must be PostgreSQL"),
        ("ducklake:postgres:", "no PostgreSQL connection string"),
        ("ducklake:postgres:  ", "no PostgreSQL connection string"),
        ("ducklake:postgres:dbname=l password=hunter2", "give it in PGPASSWORD"),
        ("ducklake:postgres:dbname=l PASSWORD = hunter2", "give it in PGPASSWORD"),
    ],
)
def test_a_lake_name_that_cannot_serve_is_refused_in_words(location, said):
    with pytest.raises(StoreError, match=said) as refused:
        lake.connection_string(location)
    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize(
    "location",
    [
        "ducklake:postgres:postgresql://u:hunter2@h:5432/l",
        "ducklake:postgres:postgres://u:hunter2@[::1]/l",
        "ducklake:postgres:postgresql://h/l?user=u&password=hunter2",
        "ducklake:postgres:postgresql://h/l?Password=hunter2",
    ],
)
def test_a_password_in_a_uri_is_refused_as_in_a_key_value_string(location):
    """A hostile pass: a URI's password was taken, printed in the run's first line and stored
    with its flow run's parameters; only `password=...` was refused."""
    with pytest.raises(StoreError, match="the connection string holds a password") as refused:
        lake.connection_string(location)
    assert "hunter2" not in str(refused.value)


def test_a_uri_takes_its_connect_timeout_as_a_parameter():
    """A hostile pass: ` connect_timeout=10` after a URI was read as its database's name."""
    assert lake.connection_string("ducklake:postgres:postgresql://u@h:5/l") == (
        "postgresql://u@h:5/l?connect_timeout=10"
    )
    assert lake.connection_string("ducklake:postgres:postgresql://u@[::1]:5/l?sslmode=require") == (
        "postgresql://u@[::1]:5/l?sslmode=require&connect_timeout=10"
    )


def test_a_name_is_a_lake_only_with_its_prefix():
    assert lake.is_lake("ducklake:postgres:dbname=l")
    assert not lake.is_lake("results/ducklake:postgres.duckdb")
    assert lake.connection_string("ducklake:postgres: dbname=l host=h ") == (
        "dbname=l host=h connect_timeout=10"  # an unanswering host is waited for 10 s at most
    )
    given = "ducklake:postgres:dbname=l connect_timeout=3"
    assert lake.connection_string(given) == "dbname=l connect_timeout=3"


def test_a_claim_without_psycopg_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # not installed
    with pytest.raises(StoreError, match=r"psycopg: pip install -c constraints.txt '\.\[lake\]'"):
        lake.claim_run("ducklake:postgres:dbname=l", "r")


def sweep_config(folder):
    config = folder / "s.yaml"
    config.write_text(json.dumps({
        "name": "s", "seed": 3,
        "models": [{"name": "o", "model": "baseline:oracle"},
                   {"name": "r", "model": "baseline:random"}],
        "manifolds": [{"manifold": "objects", "count": 6, "grid": {"length": [2, 4]}},
                      {"manifold": "sequence", "count": 5}],
    }))  # fmt: skip
    return config


def figures(location):
    """What `numerate report --points` says of the one run in `location` (its summaries, then
    its points), without its id."""
    shown = runner.invoke(app, ["report", "--db", location, "--points", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    tables = json.loads(shown.stdout)
    rows = [{k: v for k, v in row.items() if k != "run_id"}
            for key in ("summaries", "points") for row in tables[key]]  # fmt: skip
    assert rows  # summaries and points
    return rows


def assert_same_figures(got, want):
    """The same rows, floats to their last bits but the order in which answers were summed."""
    assert len(got) == len(want)
    for shown, expected in zip(got, want, strict=True):
        assert shown.keys() == expected.keys()
        for key, value in expected.items():
            assert shown[key] == (pytest.approx(value) if isinstance(value, float) else value), key


def run_ids(location):
    """The runs of `location`, oldest first (by the time each started, to the microsecond:
    `runs` shows it to the second, and two runs of a fast machine began in one)."""
    sql = "SELECT run_id FROM runs ORDER BY started_at"
    listed = runner.invoke(app, ["db", location, sql, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    return [run["run_id"] for run in json.loads(listed.stdout)]


def compared(location):
    """What `numerate compare` says of the two runs of `location`, without their ids."""
    base, new = run_ids(location)
    shown = runner.invoke(app, ["compare", base, new, "--db", location, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)


STAMP = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?(\+00:00)?"  # when runs started and ended
    r"|\b\d+\.\d\d s\b"  # how long an answer took (as the view shows it: 0.01 s)
)
LABEL = re.compile(r'(title="results database \(read-only\)">|export of )[^<]*')


def viewed(location, folder):
    """Every page of `numerate view`'s export of `location`: the runs' ids (oldest first: RUN0,
    RUN1), the database's name and the times runs started and finished put aside."""
    done = runner.invoke(app, ["view", "--db", location, "--export", str(folder)])
    assert done.exit_code == 0, done.output
    pages, ids = {}, run_ids(location)
    for page in sorted(folder.rglob("*.html")):
        name, text = str(page.relative_to(folder)), page.read_text()
        for i, run_id in enumerate(ids):
            name, text = name.replace(run_id, f"RUN{i}"), text.replace(run_id, f"RUN{i}")
        pages[name] = LABEL.sub(r"\1", STAMP.sub("TIME", text))
    return pages


def test_sweeps_in_a_lake_show_what_a_file_shows(lake, tmp_path):
    """The same two sweeps in a lake and in a file: `report`, `compare` and every page of
    `view` show the same figures."""
    config = sweep_config(tmp_path)
    file = str(tmp_path / "file.duckdb")
    for where in (lake, file):
        for _ in range(2):
            done = runner.invoke(app, ["run", "--config", str(config), "--db", where])
            assert done.exit_code == 0, done.output
    Store.close_all()
    assert_same_figures(figures(lake), figures(file))
    assert_same_figures(compared(lake), compared(file))
    in_lake, in_file = viewed(lake, tmp_path / "lake-pages"), viewed(file, tmp_path / "pages")
    assert in_lake.keys() == in_file.keys() and len(in_lake) > 10
    for name, page in in_lake.items():
        assert page == in_file[name], name
    counted = runner.invoke(app, ["db", lake, "SELECT count(*) AS n FROM responses", "--format",
                                  "json"])  # fmt: skip
    assert json.loads(counted.stdout) == [{"n": 2 * 2 * (6 * 2 + 5)}]
    assert list((tmp_path / "lake").rglob("*.parquet"))  # the rows are the lake's files


@pytest.mark.parametrize("table", sorted(KEYS))
def test_a_row_written_again_in_a_lake_is_one_row(lake, table):
    """A lake has no primary keys: a retried or resumed write is kept once by the MERGE on
    KEYS, as in a file (tests/store/test_keys.py)."""
    store = Store.open(lake)
    with store.session() as con:
        columns = columns_of(con, table)
        names = [name for name, _ in columns]
        mark = marked_column(table, columns)
        insert_rows(con, table, names, [row(columns, table, "a", "stored a")])
        insert_rows(con, table, names, [row(columns, table, "a", "a again"),
                                        row(columns, table, "b", "b")])  # fmt: skip
        stored = con.execute(
            f'SELECT "{KEYS[table][0][0]}", "{mark}" FROM {table} ORDER BY 1'
        ).fetchall()
    kept = "stored a" if KEYS[table][1] == "first" else "a again"
    assert stored == [("a", kept), ("b", "b")]


def test_a_lake_reader_reads_no_file_outside_the_lake(lake, tmp_path):
    done = runner.invoke(app, ["run", "--config", str(sweep_config(tmp_path)), "--db", lake])
    assert done.exit_code == 0, done.output
    Store.close_all()
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    read = runner.invoke(app, ["db", lake, f"SELECT * FROM read_csv('{secret}')"])
    assert read.exit_code == 2 and "Permission Error" in read.stderr, read.output
    assert "Traceback" not in read.output
    # hostile passes: inside the lake's own folder, COPY replaced a data file (the run's
    # answers lost) and planted others, EXPORT would write there too, and DuckLake's
    # maintenance (CHECKPOINT, its functions called or selected from) wrote Parquet files
    # before its read-only commit failed; PostgreSQL's functions reached the catalog's server
    data = Path(os.environ["NUMERATE_LAKE_DATA"])
    [kept] = [p for p in data.rglob("*.parquet") if "responses" in str(p)][:1]
    before = kept.read_bytes()
    files = sorted(data.rglob("*"))
    written = (
        f"COPY (SELECT 42 AS x) TO '{kept}' (FORMAT parquet)",
        f"COPY (SELECT 1) TO '{data}/planted.csv'",
        f"EXPORT DATABASE '{data}/out'",
        "CHECKPOINT",
        "SELECT * FROM checkpoint('numerate_lake')",
        "CALL ducklake_merge_adjacent_files('numerate_lake')",
        "SELECT * FROM ducklake_merge_adjacent_files('numerate_lake')",
        "SELECT * FROM main.\"DuckLake_Rewrite_Data_Files\"('numerate_lake')",
        "EXPLAIN ANALYZE CHECKPOINT",
        f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{data}/explained.csv'",
        "FROM query('SELECT * FROM ducklake_flush_inlined_data(''numerate_lake'')')",
        "SELECT * FROM postgres_query('__ducklake_metadata_numerate_lake', 'SELECT 1')",
        # a review: DuckDB's logs, written where a lake's reader may read
        f"FROM enable_logging(level='trace', storage='file', storage_path='{data}/main/planted')",
    )
    for sql in written:
        refused = runner.invoke(app, ["db", lake, sql])
        assert refused.exit_code == 2 and refused.stdout == "", (sql, refused.output)
        assert refused.stderr.startswith("error: numerate db only reads"), refused.stderr
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
    assert kept.read_bytes() == before
    assert sorted(data.rglob("*")) == files
    # what only reads the lake is not refused
    query = (
        "SELECT count(*) > 1 AS many, any_value(murmur3_32('x')) IS NOT NULL AS hashed "
        "FROM ducklake_snapshots('numerate_lake')"
    )  # an extension's scalar computes
    read = runner.invoke(app, ["db", lake, query, "--format", "csv"])
    assert read.exit_code == 0 and read.stdout == "many,hashed\ntrue,true\n", read.output
    # a hostile pass: DuckDB let the reader read its spill folder too, `.tmp` in the working
    # directory, whatever a link there points to
    only = ("SELECT current_setting('allowed_directories') = [data_path] AS only, "
            "current_setting('temp_directory') = '' AS unspilled FROM "
            "ducklake_settings('numerate_lake')")  # fmt: skip
    read = runner.invoke(app, ["db", lake, only, "--format", "csv"])
    assert read.exit_code == 0 and read.stdout == "only,unspilled\ntrue,true\n", read.output
    # a query's error quoting a value (an endpoint's error, stored) is no PostgreSQL stopped
    words = runner.invoke(app, ["db", lake, "SELECT 'Connection refused'::INTEGER"])
    assert words.exit_code == 2, words.output
    assert words.stderr.startswith("error: Conversion Error:"), words.stderr
    # an extension's type, not loaded: whose it is, not an install that failed for no reason
    inet = runner.invoke(app, ["db", lake, "SELECT '127.0.0.1'::INET"])
    assert inet.exit_code == 2 and inet.stderr == (
        'error: Catalog Error: Type with name "INET" is not in the catalog, but it exists in '
        "the inet extension.\n"
    ), inet.output


def test_a_new_lake_without_a_folder_for_its_files_says_so(lake, tmp_path, monkeypatch):
    monkeypatch.delenv("NUMERATE_LAKE_DATA")
    done = runner.invoke(app, ["run", "--config", str(sweep_config(tmp_path)), "--db", lake])
    assert done.exit_code == 2, done.output
    assert "set NUMERATE_LAKE_DATA" in done.stderr and "Traceback" not in done.output


def test_a_new_lake_is_made_only_on_a_folder_it_can_write(lake, tmp_path, monkeypatch):
    """A hostile pass: with NUMERATE_LAKE_DATA a file, the first run failed after the catalog
    had kept that path for good, and every later command failed on it, whatever folder was
    set then."""
    config = sweep_config(tmp_path)
    (tmp_path / "afile").write_text("x\n")
    monkeypatch.setenv("NUMERATE_LAKE_DATA", str(tmp_path / "afile"))
    refused = runner.invoke(app, ["run", "--config", str(config), "--db", lake])
    assert refused.exit_code == 2 and len(refused.stderr.splitlines()) == 1, refused.output
    assert refused.stderr == (
        f"error: cannot make lake {lake}: NUMERATE_LAKE_DATA='{tmp_path / 'afile'}': that is "
        "a file, not a folder for the lake's files\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NUMERATE_LAKE_DATA", "files")  # relative: made absolute
    done = runner.invoke(app, ["run", "--config", str(config), "--db", lake])
    assert done.exit_code == 0, done.output
    assert list((tmp_path / "files").rglob("*.parquet"))


def test_a_new_lakes_folder_under_home_is_the_users(tmp_path, monkeypatch):
    """A review: `~/lakefiles` (quoted, or from a deployment's job variables) became a folder
    named `~` in the working directory, kept by the catalog for good."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NUMERATE_LAKE_DATA", "~/lakefiles")
    made = lake_module.new_lake_folder("ducklake:postgres:dbname=l")
    assert made == f"{tmp_path / 'home' / 'lakefiles'}/"
    assert (tmp_path / "home" / "lakefiles").is_dir() and not (tmp_path / "~").exists()


def test_an_existing_lake_keeps_its_folder_whatever_numerate_lake_data_says(
    lake, tmp_path, monkeypatch
):
    """The catalog says where a lake's files are: a NUMERATE_LAKE_DATA set for another lake (or
    a folder mounted elsewhere) made every command fail with DuckDB's "does not match existing
    data path"."""
    config = sweep_config(tmp_path)
    assert runner.invoke(app, ["run", "--config", str(config), "--db", lake]).exit_code == 0
    Store.close_all()
    made = figures(lake)
    other = tmp_path / "other"
    monkeypatch.setenv("NUMERATE_LAKE_DATA", f"{other}/")
    read = runner.invoke(app, ["report", "--db", lake, "--format", "csv"])
    assert read.exit_code == 0, read.output
    again = runner.invoke(app, ["run", "--config", str(config), "--db", lake, "--fresh"])
    assert again.exit_code == 0, again.output
    assert_same_figures(figures(lake), made)
    assert not other.exists()


def test_a_lakes_data_file_cut_short_is_named_as_a_damaged_file(lake, tmp_path):
    """A hostile pass: `regrade` and `cache clear` on a lake whose Parquet file was cut short
    were tracebacks (exit 1: DuckDB's "Invalid footer length" is an Invalid Input Error, not a
    damaged database's words), `report` said DuckDB's line alone, and `ingest` blamed the
    source's shards."""
    done = runner.invoke(app, ["run", "--config", str(sweep_config(tmp_path)), "--db", lake])
    assert done.exit_code == 0, done.output
    Store.close_all()
    data = Path(os.environ["NUMERATE_LAKE_DATA"])
    [cut] = [p for p in data.rglob("*.parquet") if "responses" in str(p)][:1]
    cut.write_bytes(cut.read_bytes()[:100])
    commands = (["regrade", "--run", "latest"], ["cache", "clear", "--model", "baseline:random"])
    for command in (*commands, ["report"]):
        failed = runner.invoke(app, [*command, "--db", lake])
        assert failed.exit_code == 2 and len(failed.stderr.splitlines()) == 1, failed.output
        assert failed.stderr.startswith(f"error: results database {lake} cannot be read")
        assert "Invalid footer length" in failed.stderr and cut.name in failed.stderr
        assert "damaged or truncated file" in failed.stderr and "Traceback" not in failed.output
        Store.close_all()


@pytest.mark.parametrize("where", ["port", "socket"])
def test_a_lake_that_cannot_be_reached_is_one_line_for_now(tmp_path, where):
    """No PostgreSQL answering is this moment's, not the input's: exit 3 (it was 2; a review:
    still 2 for a server reached by its socket, PostgreSQL's default without a host)."""
    from tests.prefect_server import free_port

    host = f"host=127.0.0.1 port={free_port()}" if where == "port" else f"host={tmp_path}"
    location = f"ducklake:postgres:dbname=x {host} user=postgres"
    read = runner.invoke(app, ["report", "--db", location])
    assert read.exit_code == 3 and read.stdout == "", read.output
    reason = "Connection refused" if where == "port" else "No such file or directory"
    assert read.stderr.startswith(
        f"error: cannot open lake {location}: PostgreSQL does not answer now ({reason}"
    ), read.stderr
    assert read.stderr.endswith("the same command goes on once it does\n"), read.stderr
    assert len(read.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ("dbname=nosuch", 'FATAL: database "nosuch" does not exist'),
        ("dbname=lake port=99999", 'invalid port number: "99999"'),  # libpq's reason was cut
    ],
)
def test_a_lake_named_wrong_is_bad_input_in_libpqs_words(postgres_server, words, said):
    location = postgres_server.location() + " " + words  # a later word wins in libpq
    read = runner.invoke(app, ["report", "--db", location])
    assert read.exit_code == 2 and read.stdout == "", read.output
    assert read.stderr == f"error: cannot open lake {location}: {said}\n"


@pytest.mark.parametrize(
    ("error", "said"),
    [  # what DuckDB raised when PostgreSQL stopped under a run (seen: exit 1, of three kinds)
        (duckdb.Error('Failed to get global stats information from DuckLake: Failed to prepare '
                      'COPY "COPY (SELECT 1) TO STDOUT": server closed the connection '
                      "unexpectedly\n\tThis probably means the server terminated abnormally"),
         "server closed the connection unexpectedly This probably means the server"),
        (duckdb.IOException('IO Error: Failed to query most recent snapshot for DuckLake: Unable '
                            'to connect to Postgres at "dbname=l port=5": connection to server '
                            'at "127.0.0.1", port 5 failed: Connection refused\n\tIs the server '
                            "running on that host?\n\nLINE 2: SELECT * FROM postgres_query"),
         "Connection refused Is the server running on that host?"),
        (duckdb.BinderException('Binder Error: Failed to get data file list from DuckLake: '
                                'Failed to prepare query "SELECT 1": server closed the '
                                "connection unexpectedly"),
         "server closed the connection unexpectedly"),
        (duckdb.IOException("IO Error: Failed to get data file list from DuckLake: Failed to fetch "
                            "header for COPY: FATAL:  terminating connection due to "
                            "administrator command"),
         "IO Error: Failed to get data file list from DuckLake: Failed to fetch header for COPY"),
        (duckdb.ConversionException("Conversion Error: Could not convert string 'Connection "
                                    "refused' to INT32"), None),  # a value, not a server
        # a review: a value quoting the extension's words too, and a column named so
        (duckdb.ConversionException("Conversion Error: Could not convert string 'Failed to "
                                    "fetch https://api.example/v1: Connection refused' to INT32"),
         None),
        (duckdb.BinderException('Binder Error: Referenced column "DuckLake: Connection '
                                'refused" not found in FROM clause!'), None),
        # a review: a server recovering from a crash, and a socket where none answers
        (duckdb.IOException('IO Error: Failed to query most recent snapshot for DuckLake: Unable '
                            'to connect to Postgres at "dbname=l": connection to server at '
                            '"127.0.0.1", port 5 failed: FATAL:  the database system is in '
                            "recovery mode"),
         "FATAL: the database system is in recovery mode"),
        (duckdb.IOException('IO Error: Unable to connect to Postgres at "dbname=l host=/x": '
                            'connection to server on socket "/x/.s.PGSQL.5432" failed: No such '
                            "file or directory\n\tIs the server running locally and accepting "
                            "connections on that socket?"),
         "No such file or directory Is the server running locally"),
    ],
)  # fmt: skip
def test_a_postgresql_that_does_not_answer_is_known_by_its_words_and_its_kind(error, said):
    found = lake_module.unreachable(error)
    assert found == said if said is None else found.startswith(said), found


def test_a_lake_whose_postgresql_stops_under_a_command_says_so_for_now(tmp_path, monkeypatch):
    """A hostile pass: PostgreSQL stopped under a run or an ingest was "a damaged or
    truncated file?" (exit 2), or a traceback (exit 1: the ROLLBACK that followed failed too,
    and its error hid the first)."""
    from tests import postgres

    try:
        server = postgres.start()
    except RuntimeError as error:
        pytest.skip(f"no PostgreSQL for the lake's tests: {error}")
    monkeypatch.setenv("NUMERATE_LAKE_DATA", f"{tmp_path / 'files'}/")
    monkeypatch.setenv("NUMERATE_LAKE_JOURNALS", str(tmp_path / "journals"))
    try:
        server.create_database("lost")
        location = server.location("lost")
        store = Store.open(location)
        store.start_run("a", "s", "h", {}, "v")
        # an error met after the connection was lost may say nothing of it: PostgreSQL is asked
        quiet = duckdb.InvalidInputException(
            "Invalid Input Error: Attempting to fetch from an unsuccessful query result\nError: "
            "TransactionContext Error: Current transaction is aborted (please ROLLBACK)"
        )
        assert lake_module.away(location, quiet) is None  # it answers
        with Reader.open(location) as reader:
            server.halt()
            assert isinstance(lake_module.away(location, quiet), StoreFailedForNow)
            for act in (lambda: store.set_run_status("a", "failed"),
                        lambda: reader.frame("FROM runs")):  # fmt: skip
                with pytest.raises(StoreFailedForNow) as raised:
                    act()
                said = str(raised.value)
                assert said.startswith(f"results database {location}: PostgreSQL does not answer")
                assert "Connection refused" in said and "damaged" not in said
    finally:
        Store.close_all()
        server.stop()


def test_every_command_works_on_a_lake(lake, tmp_path):
    """What a file serves, a lake serves: two sweeps, a NumGen run, then each command that
    reads or changes results."""
    config = str(sweep_config(tmp_path))
    for _ in range(2):
        done = runner.invoke(app, ["run", "--config", config, "--db", lake])
        assert done.exit_code == 0, done.output
    listed = runner.invoke(app, ["runs", "--db", lake, "--format", "json"])
    ids = [run["id"] for run in json.loads(listed.stdout)]
    assert len(ids) == 2
    images = str(tmp_path / "images")
    numgen = ["numgen", "run", "--generator", "synthetic", "--detector", "blobs", "--db", lake,
              "--images-dir", images]  # fmt: skip
    assert runner.invoke(app, numgen).exit_code == 0
    commands = [
        (["compare", *ids, "--db", lake], "0 regressions"),
        (["regrade", "--run", ids[0], "--db", lake], "0 outcome(s) changed"),
        (["numgen", "report", "--db", lake], "synthetic"),
        (["plot", "--out", str(tmp_path / "p.png"), "--db", lake], "p.png"),
        (["view", "--db", lake, "--export", str(tmp_path / "pages")], "files in"),
        (["upgrade", "--db", lake], "already has schema version"),
        (["cache", "clear", "--db", lake, "--model", "baseline:oracle"], "removed"),
    ]
    for command, said in commands:
        result = runner.invoke(app, command)
        assert result.exit_code == 0 and said in result.output, (command, result.output)
    assert (tmp_path / "pages" / "index.html").is_file()


def test_a_lakes_run_draws_no_plot_where_the_process_runs(lake, tmp_path, monkeypatch):
    """A deployment's sweep draws its plot beside a file database; a lake has no folder beside
    it, and the folder the worker runs in (a checkout) is no place for it."""
    import asyncio

    from numerate.config.sweep import SweepConfig
    from numerate.flows.sweep import sweep

    config = SweepConfig.model_validate(json.loads(sweep_config(tmp_path).read_text()))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    for where in (lake, str(tmp_path / "file.duckdb")):
        asyncio.run(sweep(config, where, plot=True))
    assert len(list((tmp_path / "plots").glob("*.png"))) == 1  # the file's
    assert not any((tmp_path / "cwd").iterdir())


def live_files(location):
    store = Store.open(location)
    counted = store.query(
        f"SELECT count(*) FROM __ducklake_metadata_{lake.ALIAS}.ducklake_data_file "
        "WHERE end_snapshot IS NULL"
    )[0][0]
    Store.close_all()
    return counted


def test_upgrade_merges_a_lakes_small_files_and_keeps_every_figure(lake, tmp_path):
    config = str(sweep_config(tmp_path))
    for _ in range(3):
        assert runner.invoke(app, ["run", "--config", config, "--db", lake]).exit_code == 0
    Store.close_all()
    before, shown = live_files(lake), figures_of_all(lake)
    upgraded = runner.invoke(app, ["upgrade", "--db", lake])
    assert upgraded.exit_code == 0, upgraded.output
    assert "maintained: " in upgraded.stdout and "small files were merged" in upgraded.stdout
    assert live_files(lake) < before
    assert figures_of_all(lake) == shown


def figures_of_all(location):
    listed = runner.invoke(app, ["db", location, "SELECT * EXCLUDE (run_id) FROM summaries "
                                 "ORDER BY ALL", "--format", "json"])  # fmt: skip
    assert listed.exit_code == 0, listed.output
    return json.loads(listed.stdout)


def test_shards_are_ingested_into_a_lake_each_run_once(lake, tmp_path):
    """Moving in: runs published as Parquet shards (a worker's, or a file database's) go into
    a lake by `ingest`, and ingesting them again stores nothing twice."""
    import asyncio

    from numerate.flows.sweep import sweep
    from tests.store.test_shards import config as sharded

    shards = tmp_path / "shards"
    for model in ("oracle", "random"):
        asyncio.run(sweep(sharded(model, shards), str(tmp_path / f"{model}.duckdb")))
    Store.close_all()
    for _ in range(2):
        done = runner.invoke(app, ["ingest", str(shards), "--db", lake])
        assert done.exit_code == 0, done.output
    counted = runner.invoke(app, ["db", lake, "SELECT count(*) AS n, count(DISTINCT run_id) AS "
                                  "runs FROM responses", "--format", "json"])  # fmt: skip
    assert json.loads(counted.stdout) == [{"n": 20, "runs": 2}]


def test_a_file_databases_runs_move_into_a_lake_each_once(lake, tmp_path):
    config = str(sweep_config(tmp_path))
    file = str(tmp_path / "file.duckdb")
    for _ in range(2):
        assert runner.invoke(app, ["run", "--config", config, "--db", file]).exit_code == 0
    Store.close_all()
    moved = runner.invoke(app, ["ingest", file, "--db", lake])
    assert moved.exit_code == 0 and "ingested 2 run(s)" in moved.stdout, moved.output
    again = runner.invoke(app, ["ingest", file, "--db", lake])
    assert again.exit_code == 0 and "ingested 0 run(s)" in again.stdout, again.output
    assert_same_figures(figures_of_all(lake), figures_of_all(file))  # graded there anew


def test_the_password_comes_from_a_prefect_secret_and_is_never_shown(lake, monkeypatch):
    from prefect.blocks.system import Secret

    from numerate.kernel.credentials import registered_secrets

    monkeypatch.setenv("PGPASSWORD", "")  # what the test sets is undone after it
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("NUMERATE_LAKE_SECRET", "numerate-test-missing")
    missing = runner.invoke(app, ["run", "--db", lake, "--model", "baseline:oracle"])
    assert missing.exit_code == 2 and "no Prefect Secret block of that name" in missing.stderr
    Secret(value="s3cret-lake-pw").save("numerate-test-lake", overwrite=True)
    monkeypatch.setenv("NUMERATE_LAKE_SECRET", "numerate-test-lake")
    done = runner.invoke(app, ["run", "--db", lake, "--model", "baseline:oracle"])
    assert done.exit_code == 0, done.output
    assert os.environ["PGPASSWORD"] == "s3cret-lake-pw"  # libpq's, for this process
    assert "s3cret-lake-pw" in registered_secrets() and "s3cret-lake-pw" not in done.output


HOLDER = """
import sys
from numerate.store import Store
store = Store.open(sys.argv[1])
print(store.claim_run("run-1"), flush=True)
sys.stdin.read()  # held until the test kills this process
"""


def test_a_lakes_run_is_claimed_once_across_machines_and_freed_by_a_killed_holder(lake, tmp_path):
    """Two processes with journals of their own (two machines) never hold one run of a lake
    at once; a holder's release, or its death, frees the run for the next."""
    import signal
    import subprocess
    import sys
    import time

    here = Store.open(lake)  # makes the lake
    elsewhere = dict(os.environ, NUMERATE_LAKE_JOURNALS=str(tmp_path / "other-machine"))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, lake], env=elsewhere,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        assert not here.claim_run("run-1")
        assert here.claim_run("run-2")
        other = Store(lake)  # another session of PostgreSQL's, as another machine's
        assert not other.claim_run("run-2")
        here.close()
        assert other.claim_run("run-2")  # released with its store
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        deadline = time.monotonic() + 20  # PostgreSQL ends the dead holder's session
        while not other.claim_run("run-1"):
            assert time.monotonic() < deadline, "a killed holder's claim was never freed"
            time.sleep(0.05)
        other.close()
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_write_that_loses_a_commit_race_in_a_lake_is_tried_again(lake):
    """Two writers that update one table conflict in a lake (DuckLake: "Failed to commit"),
    even on other rows; the one that committed second tries its whole write again."""
    here, elsewhere = Store.open(lake), Store(lake)
    for run_id in ("a", "b"):
        here.start_run(run_id, "s", "h", {}, "v")
    tries = []

    def finish_a(con):
        tries.append(len(tries))
        con.execute("UPDATE runs SET status = 'finished' WHERE run_id = 'a'")
        if len(tries) == 1:  # meanwhile another writer's commit comes first
            elsewhere.set_run_status("b", "failed")

    here.write(finish_a)
    assert tries == [0, 1]
    assert here.query("SELECT run_id, status FROM runs ORDER BY 1") == [
        ("a", "finished"),
        ("b", "failed"),
    ]
    elsewhere.close()


def test_writers_of_one_lake_at_once_lose_nothing(lake):
    """Two writers that swap runs' aggregates and statuses at once (as two sweeps that end
    together): every write lands."""
    import threading

    import polars as pl

    stores = [Store.open(lake), Store(lake)]
    for i in range(2):
        stores[0].start_run(f"r{i}", "s", "h", {}, "v")
    failures = []

    def finish(store, run_id):
        try:
            for n in range(8):
                points = pl.DataFrame({
                    "run_id": run_id, "model": "m", "manifold": "x", "point_key": "k",
                    "params": "{}", "n": n, "n_scored": n, "correct": 0, "wrong": n,
                    "unparsed": 0, "truncated": 0, "error": 0, "ci_low": 0.0, "ci_high": 1.0,
                    "chance": 0.5, "error_rate": 0.0,
                })  # fmt: skip
                store.replace_aggregates(run_id, points, pl.DataFrame())
                store.set_run_status(run_id, "finished")
        except Exception as error:
            failures.append(error)

    threads = [threading.Thread(target=finish, args=(s, f"r{i}")) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stores[1].close()
    assert failures == []
    assert stores[0].query("SELECT run_id, n FROM points ORDER BY 1") == [("r0", 7), ("r1", 7)]


def test_a_process_attaches_a_lake_once_to_read_and_sees_each_new_snapshot(lake, monkeypatch):
    """`numerate view` reads a lake page after page: the lake is attached once, and each
    reader sees what was committed since the last."""
    made = []
    reading = lake_module._reading
    monkeypatch.setattr(lake_module, "_reading", lambda name: made.append(name) or reading(name))
    monkeypatch.setattr(lake_module, "_READING", {})
    done = runner.invoke(app, ["run", "--db", lake, "--model", "baseline:oracle"])
    assert done.exit_code == 0, done.output
    Store.close_all()
    counted = "SELECT count(*) FROM responses"
    first = lake_module.read_only(lake).execute(counted).fetchall()[0][0]
    assert runner.invoke(app, ["run", "--db", lake, "--model", "baseline:oracle"]).exit_code == 0
    Store.close_all()
    again = lake_module.read_only(lake)
    assert again.execute(counted).fetchall()[0][0] == 2 * first > 0
    assert made == [lake]
    with pytest.raises(Exception, match="Cannot change configuration"):
        again.execute("SET enable_external_access = true")  # a cursor keeps the locks


def test_a_lake_reader_waits_for_no_writer(lake):
    """A reader of a lake opens its latest snapshot while a writer's transaction is open, in
    another process, and sees what was committed, not what is being written: nothing waits
    for the writer's commit (a file's readers wait for its writers: docs/sharing.md)."""
    import subprocess
    import sys

    store = Store.open(lake)
    store.start_run("committed", "s", "h", {}, "v")
    read = (
        "import sys; from numerate.store.reader import Reader; "
        "print(Reader.open(sys.argv[1]).query('SELECT run_id FROM runs ORDER BY 1'))"
    )
    with store.session() as con:
        con.execute("BEGIN TRANSACTION")
        con.execute("UPDATE runs SET status = 'finished' WHERE run_id = 'committed'")
        con.execute(
            "INSERT INTO runs (run_id, sweep_name, config_hash, config, code_version, status, "
            "started_at) VALUES ('writing', 's', 'h', '{}', 'v', 'running', now())"
        )
        seen = subprocess.run(
            [sys.executable, "-c", read, lake], capture_output=True, text=True, timeout=120
        )  # the writer's transaction is still open: a reader that waited for it times out
        con.execute("ROLLBACK")
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert seen.stdout.strip() == "[('committed',)]"


def test_a_lakes_cases_keep_each_prompt_once_through_migration_14(lake):
    """Migration 14 copies `cases` with each row's `data` without the fields its columns hold,
    on a lake as in a file (a lake at schema 13: one made now, its 14th migration undone)."""
    from numerate.config.sweep import parse_sweep_config
    from numerate.planning.plan import REPEATED, case_row, plan_points

    config = parse_sweep_config({
        "name": "t", "models": [{"name": "b", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": "shuffle", "count": 2}],
    })  # fmt: skip
    cases = plan_points(config.manifolds[0], 3)[0].cases()
    whole = [{**case_row(case), "data": case.case.model_dump_json()} for case in cases]
    store = Store.open(lake)
    with store.session() as con:
        insert_rows(con, "cases", list(whole[0]), whole)
        con.execute("DELETE FROM schema_migrations WHERE version >= 14")  # the later ones too
    Store.close_all()

    stored = dict(Store.open(lake).query("SELECT case_id, CAST(data AS VARCHAR) FROM cases"))
    for case in cases:
        rest = {k: v for k, v in case.case.model_dump(mode="json").items() if k not in REPEATED}
        assert json.loads(stored[case.case_id]) == rest
    versions = Store.open(lake).query("SELECT max(version) FROM schema_migrations")
    assert versions == [(SCHEMA_VERSION,)]


def graded(run_id: str, case_id: str, outcome: str) -> dict:
    """A `responses` row (its other columns NULL)."""
    return dict.fromkeys(JOURNALED["responses"]) | {
        "run_id": run_id, "model": "m", "model_id": "m", "manifold": "objects",
        "case_id": case_id, "sample_index": 0, "point_key": "default", "request_hash": case_id,
        "raw_text": "1", "answer": "1", "outcome": outcome, "error": None,
        "finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 0.1,
        "cached": False, "graded_at": now(),
    }  # fmt: skip


def test_a_dead_process_s_journal_that_loses_a_commit_race_in_a_lake_is_tried_again(lake):
    """Writing a dead process's journal is a write like any other: when another writer's
    commit comes first, it is tried again. Before, the conflict was said as rows the table
    refuses, with the advice to move the journal away (its answers then lost)."""
    from numerate.store.journal import journal_dir

    here = Store.open(lake)
    here.start_run("a", "s", "h", {}, "v")
    here.receive("responses", [graded("a", "c1", "wrong")])
    here.flush()
    elsewhere = Store(lake)  # open before the dead journal is there: it does not replay it
    Store.close_all()
    folder = journal_dir(lake)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dead.owner").write_text("")
    regraded = json.dumps(["responses", graded("a", "c1", "correct")], default=str)  # replaces
    (folder / "dead.000001.jsonl").write_text(regraded + "\n")
    tries = []
    write_rows = Store._write_rows

    def racing(self, con, rows):
        write_rows(self, con, rows)
        if self is elsewhere:
            return
        tries.append(len(tries))
        if len(tries) == 1:  # meanwhile another writer's commit comes first
            elsewhere.receive("responses", [graded("a", "c2", "correct")])
            elsewhere.flush()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Store, "_write_rows", racing)
        store = Store.open(lake)
    assert tries == [0, 1]
    assert store.query("SELECT case_id, outcome FROM responses ORDER BY 1") == [
        ("c1", "correct"),
        ("c2", "correct"),
    ]
    assert not (folder / "dead.000001.jsonl").exists()
    elsewhere.close()


def test_a_lakes_run_whose_claim_is_gone_is_said_to_have_stopped(lake):
    """`report` said a lake's run was still running after its process was killed: liveness
    was read from journals, which are on each writer's machine. A run's claim is a lock in
    the lake's PostgreSQL, which any machine can see held (or not), without taking it.
    `numerate runs` and the viewer list such a run `stopped` (they listed it `running`)."""
    from numerate.results.report import run_state
    from numerate.results.runs import list_runs
    from numerate.store.browse import STOPPED
    from numerate.store.lake import _claim_key, runs_held

    # run-6's key is negative: its lock's high half is 2**31 or more (read as one bigint in
    # SQL, it overflowed, and every read of the lake's runs failed while it was held)
    assert _claim_key("run-1") > 0 > _claim_key("run-6")
    writer = Store(lake)  # a process of its own, as another machine's
    writer.start_run("run-1", "s", "h", {}, "v")  # claims it
    other = Store(lake)
    other.start_run("run-6", "s", "h", {}, "v")
    assert runs_held(lake, ["run-1", "run-6", "run-3"]) == {"run-1", "run-6"}
    with Reader.open(lake) as reader:
        assert "run run-1 is still running" in str(run_state(reader, "run-1"))
        writer.close()  # gone, its run recorded running
        assert runs_held(lake, ["run-1", "run-6"]) == {"run-6"}
        said = str(run_state(reader, "run-1"))
        listed = list_runs(reader)
    assert said.startswith("run run-1 stopped without ending") and "resumes it" in said
    assert dict(zip(listed["id"], listed["status"], strict=True)) == {
        "run-1": STOPPED, "run-6": "running"
    }  # fmt: skip
    other.close()
    resumed = Store(lake)
    assert resumed.claim_run("run-1")  # reading the claim took no lock
    resumed.close()


def test_a_long_answer_in_a_lake_is_stored_in_pieces_and_read_back_whole(lake):
    """numerate.store.texts finds a text's pieces by DuckDB's row ids: a lake's tables have
    them too."""
    from tests.store.test_store_access import completion

    long = "".join(f"{i:05d} " for i in range(2_000))  # 12,000 bytes
    store = Store.open(lake)
    store.put_completions([{**completion("a"), "text": long}, completion("b")])
    assert store.query("SELECT count(*) FROM texts") == [(12,)]
    stored = store.get_completions(["a", "b"])
    assert (stored["a"]["text"], stored["b"]["text"]) == (long, "Answer: 1")
