"""Long texts in pieces (numerate.store.texts): DuckDB 1.5.5 holds every text of more than
4,096 bytes of the rows it reads or writes at once, and with the writer's 128 MB a sweep of a
model answering 60,000 characters beside a reasoning as long stopped at its 1,600th answer.
A long answer is stored as pieces of at most 4,000 bytes, its row a preview; every reader of
a whole text gets it back whole."""

from __future__ import annotations

import random
import string

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from numerate.cli import app
from numerate.kernel.answers import SEAM
from numerate.store import Store
from numerate.store.schema import migrate
from numerate.store.tables import insert_rows
from numerate.store.texts import PIECE_CHARS, PIECE_COLUMNS, ROW_BYTES, whole_texts
from tests.store.test_store_access import completion

runner = CliRunner()


def prose(rng: random.Random, chars: int) -> str:
    """Text of `chars` characters and no digit, each a new one (no two share a SHA-256)."""
    words = ["".join(rng.choices(string.ascii_lowercase, k=9)) for _ in range(101)]
    return (" ".join(words) * (chars // 1_000 + 1))[:chars]


@pytest.mark.slow
def test_many_long_answers_with_their_reasoning_stay_writable(tmp_path):
    """600 answers of 140,000 characters beside a reasoning as long, stored a session of 100
    at a time (a sweep's batches): every session ends, and each is read back whole. Rows that
    held them whole ran out of the writer's 128 MB as a session ended (DuckDB's checkpoint),
    and the file stayed behind (this test failed so on the code before `texts`; 130,000
    characters a session of 50 did not)."""
    rng = random.Random(7)
    store = Store.open(str(tmp_path / "long.duckdb"))
    written = {}
    for start in range(0, 600, 100):
        rows = []
        for index in range(start, start + 100):
            text, reasoning = prose(rng, 140_000) + "\nAnswer: 7", prose(rng, 140_000)
            rows.append({**completion(f"h{index}"), "text": text, "reasoning": reasoning})
            written[f"h{index}"] = (text, reasoning)
        with store.session():
            store.put_completions(rows)
    longest = store.query(
        "SELECT max(strlen(text)), max(strlen(reasoning)), count(text_sha), count(*) "
        "FROM completions"
    )
    assert longest[0][0] <= ROW_BYTES and longest[0][1] <= ROW_BYTES
    assert longest[0][2:] == (600, 600)
    assert store.query("SELECT max(strlen(piece)) <= 4000 FROM texts") == [(True,)]
    stored = store.get_completions(list(written))
    assert {key: (row["text"], row["reasoning"]) for key, row in stored.items()} == written


texts = st.text(
    alphabet=st.sampled_from(["a", " ", "é", "😀", "漢", "\n", "'", "\u0301"]), max_size=6_000
)


@settings(max_examples=60, deadline=None)
@given(answers=st.lists(st.tuples(texts, st.none() | texts), min_size=1, max_size=4))
def test_a_text_is_stored_whole_or_as_a_preview_and_its_pieces_and_read_back_as_given(answers):
    """Whatever its characters: a text of at most ROW_BYTES bytes stays in its row (no
    SHA-256); a longer one's row holds its first and last characters around the seam, its
    pieces are at most PIECE_CHARS characters each, and the whole read back is the text."""
    con = duckdb.connect()
    migrate(con)
    rows = [
        {**completion(f"h{i}"), "text": text, "reasoning": reasoning}
        for i, (text, reasoning) in enumerate(answers)
    ]
    insert_rows(con, "completions", list(rows[0]), rows)
    insert_rows(con, "completions", list(rows[0]), rows)  # again: nothing changes
    stored = con.execute(
        "SELECT text, text_sha, reasoning, reasoning_sha FROM completions ORDER BY request_hash"
    ).fetchall()

    def query(sql, params):
        return con.execute(sql, params).fetchall()

    wholes = whole_texts(query, [sha for row in stored for sha in (row[1], row[3])])
    for (text, reasoning), (kept, sha, kept_reasoning, reasoning_sha) in zip(
        answers, stored, strict=True
    ):
        for given_text, row_text, row_sha in ((text, kept, sha), (reasoning, kept_reasoning,
                                                                  reasoning_sha)):  # fmt: skip
            if given_text is None or len(given_text.encode()) <= ROW_BYTES:
                assert (row_text, row_sha) == (given_text, None)
                continue
            assert len(row_text.encode()) <= ROW_BYTES and SEAM in row_text
            head, tail = row_text.split(SEAM)
            assert given_text.startswith(head) and given_text.endswith(tail)
            assert wholes[row_sha] == given_text
    [(pieces, longest)] = con.execute("SELECT count(*), max(length(piece)) FROM texts").fetchall()
    assert longest is None or longest <= PIECE_CHARS
    assert pieces == sum(
        -(-len(t) // PIECE_CHARS)
        for t in {t for pair in answers for t in pair if t and len(t.encode()) > ROW_BYTES}
    )  # each text's pieces once, however many rows hold it


def test_a_text_the_row_held_changes_with_its_row(tmp_path):
    """A graded response replaced by one of a short answer (KEYS: the last copy stays) does
    not keep the long answer's SHA-256 (it would be read back instead of the new text)."""
    con = duckdb.connect()
    migrate(con)
    names = ["run_id", "model", "case_id", "sample_index", "raw_text", "manifold", "point_key",
             "request_hash", "outcome", "cached", "graded_at", "model_id"]  # fmt: skip
    base = {"run_id": "r", "model": "m", "case_id": "c", "sample_index": 0, "manifold": "objects",
            "point_key": "p", "request_hash": "h", "outcome": "wrong", "cached": False,
            "graded_at": completion("h")["created_at"], "model_id": "m"}  # fmt: skip
    insert_rows(con, "responses", names, [{**base, "raw_text": "x" * 5_000}])
    insert_rows(con, "responses", names, [{**base, "raw_text": "Answer: 3"}])
    assert con.execute("SELECT raw_text, raw_sha FROM responses").fetchall() == [
        ("Answer: 3", None)
    ]


def test_clearing_the_cache_removes_the_pieces_no_row_names(tmp_path):
    store = Store.open(str(tmp_path / "c.duckdb"))
    long = "x" * 9_000
    store.put_completions([{**completion("a"), "text": long}, {**completion("b"), "text": long}])
    store.put_completions([{**completion("c"), "text": "y" * 9_000}])
    assert store.query("SELECT count(DISTINCT sha) FROM texts") == [(2,)]
    assert store.clear_completions(before=None, model_ids=()) == 3
    assert store.query("SELECT count(*) FROM texts") == [(0,)]


def test_an_arrow_column_of_no_text_is_no_long_text():
    """A journal of an earlier version gives a column of None only (Arrow's null type)."""
    con = duckdb.connect()
    migrate(con)
    row = {**completion("a"), "reasoning": None}
    insert_rows(con, "completions", list(row), [row], strict=False)
    assert con.execute("SELECT count(*) FROM completions").fetchall() == [(1,)]


@pytest.fixture(scope="module")
def published_long(tmp_path_factory):
    """A run of 3 cases whose endpoint answers 30,000 characters beside a reasoning as long,
    the answer's marker and a word of its own in the middle (no preview holds them),
    published to a results folder; its database, the folder and the answers sent."""
    from tests.cli.test_run import write_config
    from tests.fake_openai import FakeOpenAI, Reply

    folder = tmp_path_factory.mktemp("published_long")
    rng = random.Random(3)
    sent: list[str] = []

    def reply(body):
        middle = f"\nAnswer: 7\nneedle{'abc'[len(sent)]} "
        text = prose(rng, 15_000) + middle + prose(rng, 15_000)
        sent.append(text)
        return Reply(content=text, reasoning=prose(rng, 30_000))

    with FakeOpenAI() as server:
        server.responder = reply
        models = [{"name": "long", "model": "m", "base_url": server.base_url}]
        config = write_config(folder / "run.yaml", models, [{"manifold": "objects", "count": 3}],
                              results_dir=str(folder / "shared"))  # fmt: skip
        done = runner.invoke(app, ["run", "--config", str(config), "--db", str(folder / "a.db")])
    assert done.exit_code == 0, done.output
    return folder / "a.db", folder / "shared", sent


def test_a_long_answer_is_graded_on_its_whole_again_and_moved_whole(published_long, tmp_path):
    """`regrade` grades each answer on its whole (its marker outside the preview), and an
    ingest brings the pieces with the rows: the central database reads the same wholes."""
    db, shared, sent = published_long
    store = Store.open(str(db))
    [(run_id,)] = store.query("SELECT run_id FROM runs")
    outcomes = store.query("SELECT case_id, outcome, answer FROM responses ORDER BY ALL")
    assert {answer for _, _, answer in outcomes} == {"7"}
    Store.close_all()
    done = runner.invoke(app, ["regrade", "--run", run_id, "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert "0 outcome(s) changed" in done.output
    central = tmp_path / "central.db"
    done = runner.invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert done.exit_code == 0, done.output
    for path in (db, central):
        store = Store.open(str(path))
        assert store.query("SELECT case_id, outcome, answer FROM responses ORDER BY ALL") == (
            outcomes
        )
        shas = store.query("SELECT raw_sha FROM responses")
        assert sorted(whole_texts(store.query, [sha for (sha,) in shas]).values()) == sorted(sent)
        Store.close_all()


def test_the_viewer_finds_a_word_of_a_long_answer_and_offers_it_whole(published_long):
    from starlette.testclient import TestClient

    from numerate.view.app import create_app

    db, _, sent = published_long
    store = Store.open(str(db))
    [(run_id,)] = store.query("SELECT run_id FROM runs")
    [(case_id, text)] = [
        (case_id, text) for case_id, text in store.query(
            "SELECT case_id, raw_text FROM responses ORDER BY case_id LIMIT 1"
        )
    ]  # fmt: skip
    Store.close_all()
    whole = next(s for s in sent if s.endswith(text.split(SEAM)[1]))
    word = next(w for w in whole.split() if w.startswith("needle"))  # in no preview
    assert word not in text
    client = TestClient(create_app(str(db)))
    found = client.get(f"/run/{run_id}/cases/objects", params={"model": "long", "q": word})
    assert found.status_code == 200 and case_id in found.text
    answer = client.get(f"/run/{run_id}/answer", params={"model": "long", "id": case_id})
    assert answer.status_code == 200 and answer.text == whole


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            "UPDATE shard_rows SET piece = replace(piece, 'e', 'E') WHERE part = 3",
            "the pieces of text '{sha}' are not the text its SHA-256 names",
        ),
        (
            "DELETE FROM shard_rows WHERE part = 2",
            "the pieces of text '{sha}' are not the text its SHA-256 names",
        ),
        (
            "INSERT INTO shard_rows SELECT sha256('planted'), 0, 'planted'",
            "a piece of text '{planted}', no answer's",
        ),
    ],
    ids=["a piece changed", "a piece missing", "a text of no answer"],
)
def test_an_ingest_refuses_pieces_that_are_not_the_text_their_sha_256_names(
    published_long, tmp_path, change, said
):
    """A hostile sweep: the pieces of texts.parquet were loaded unchecked. A text is kept by
    the first run that stores it, so pieces planted under another text's SHA-256 (or damaged)
    would have stood for that text in every later run's answers."""
    import hashlib
    import shutil

    _, shared, _ = published_long
    copy = tmp_path / "shared"
    shutil.copytree(shared, copy)
    [run_folder] = copy.iterdir()
    shard = run_folder / "texts.parquet"
    con = duckdb.connect()
    con.execute(f"CREATE TABLE shard_rows AS SELECT * FROM read_parquet('{shard}')")
    [(sha,)] = con.execute("SELECT min(sha) FROM shard_rows WHERE part = 3").fetchall()
    con.execute(change.replace("WHERE part", f"WHERE sha = '{sha}' AND part"))
    con.execute(f"COPY shard_rows TO '{shard}' (FORMAT parquet)")
    con.close()
    central = tmp_path / "central.db"
    done = runner.invoke(app, ["ingest", str(copy), "--db", str(central)])
    assert done.exit_code == 3, done.output
    planted = hashlib.sha256(b"planted").hexdigest()
    assert f"skipped run {run_folder.name}: texts.parquet row " in done.stderr
    assert said.format(sha=sha, planted=planted) in done.stderr
    assert not central.exists()  # nothing of it written (the database it made: removed)


def test_a_page_of_stored_answers_follows_their_text_not_only_their_count(
    published_long, monkeypatch
):
    """A page of `stored_answers` (regrade, an ingest's grading) was 10,000 answers whatever
    their length: 10,000 answers of 262,144 characters would have been 2.6 GB in one page."""
    from numerate.store import queries

    db, _, sent = published_long
    assert all(len(text.encode()) > 30_000 for text in sent)  # 3 answers, 90 KB and more
    monkeypatch.setattr(queries, "TEXT_BYTES_A_PAGE", 30_000)
    store = Store.open(str(db))
    try:
        [(run_id,)] = store.query("SELECT run_id FROM runs")
        pages = list(queries.stored_answers(store, run_id))
    finally:
        Store.close_all()
    assert len(pages) >= 3
    assert sorted(a.raw_text for page in pages for a in page) == sorted(sent)


def texts_shard(folder, texts: list[str], part_type: str = "INTEGER", twice: int = 0):
    """texts.parquet and responses.parquet of answers `texts` (in pieces, as a run publishes
    them; the first `twice` pieces written twice), as shard_checks reads them."""
    import hashlib

    import pyarrow as pa

    from numerate.store import shard_checks
    from numerate.store.shards import SHARD_ROW_GROUP

    shas = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
    rows = [(sha, i // PIECE_CHARS, text[i : i + PIECE_CHARS])
            for sha, text in zip(shas, texts, strict=True)
            for i in range(0, len(text), PIECE_CHARS)]  # fmt: skip
    rows += rows[:twice]
    given = pa.table({name: [row[i] for row in rows] for i, name in enumerate(PIECE_COLUMNS)})
    con = duckdb.connect()
    con.register("given", given)
    con.execute(
        f"COPY (SELECT sha, part::{part_type} AS part, piece FROM given) TO "
        f"'{folder / 'texts.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE {SHARD_ROW_GROUP})"
    )  # as a run publishes them
    con.execute("CREATE TABLE r AS SELECT unnest(?) AS raw_sha", [shas])
    con.execute(f"COPY r TO '{folder / 'responses.parquet'}' (FORMAT parquet)")
    con.close()
    return {t: shard_checks._Shard(str(folder / f"{t}.parquet")) for t in ("texts", "responses")}


def test_the_texts_of_a_shard_are_checked_within_the_writer_s_bound(tmp_path, monkeypatch):
    """A review: the check sorted every piece of texts.parquet at once, which DuckDB could not
    do within its bound: a run of 700 answers of 100,000 characters with reasonings as long
    (140 MB of texts, 128 MB) was refused as "a value too large to read". The same at a
    quarter of the scale: 40 MB of texts checked by a DuckDB of 32 MB."""
    from numerate.store import shard_checks

    rng = random.Random(5)
    texts = [prose(rng, 100_000) + str(k) for k in range(400)]
    shards = texts_shard(tmp_path, texts)
    monkeypatch.setattr(shard_checks, "TEXT_BYTES_CHECKED", 4_000_000, raising=False)  # 16 of 128
    con = duckdb.connect(config={"memory_limit": "32MB", "threads": 2})
    assert shard_checks._texts_are_answers(con, shards) is None


def test_identical_pieces_twice_and_parts_as_text_are_the_text_they_name(tmp_path):
    """A review: a piece written twice (two identical rows are one, as everywhere in a shard)
    and `part` written as text ("10" sorted before "2") were refused as another text."""
    from numerate.store import shard_checks

    texts = [prose(random.Random(6), 30_500)]  # 31 pieces
    con = duckdb.connect()
    for number, (part_type, twice) in enumerate([("INTEGER", 3), ("VARCHAR", 0)]):
        (folder := tmp_path / str(number)).mkdir()
        shards = texts_shard(folder, texts, part_type, twice)
        assert shard_checks._texts_are_answers(con, shards) is None
