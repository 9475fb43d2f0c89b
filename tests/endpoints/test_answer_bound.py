"""Issue 40, F1/F2: answers of any size. An endpoint answering 30 MiB was stored in full (the
cases page 62.9 MB, still loading in Chromium after 65 s), and one 200,000-character word made
the case page 1,685,773 px wide. A stored answer is bounded (numerate.kernel.answers), graded
on what is kept, and pages fold long answers and wrap long words."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient
from typer.testing import CliRunner

from numerate.cli import app
from numerate.kernel.answers import (
    HEAD_CHARS,
    MAX_ANSWER_CHARS,
    SEAM,
    TAIL_CHARS,
    cut_answer,
    cut_sql,
)
from tests.cli.test_run import write_config
from tests.fake_openai import Reply

runner = CliRunner()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@given(
    extra=st.integers(min_value=-3, max_value=5_000),
    start=st.text(max_size=20),
    end=st.text(max_size=20),
)
def test_an_answer_is_kept_whole_up_to_the_bound_and_cut_beyond_keeping_both_ends(
    extra, start, end
):
    middle = "reasoning, " * ((MAX_ANSWER_CHARS + extra) // 11 + 1)
    text = start + middle[: max(0, MAX_ANSWER_CHARS + extra - len(start) - len(end))] + end
    stored, received = cut_answer(text)
    assert len(stored) <= MAX_ANSWER_CHARS
    if len(text) <= MAX_ANSWER_CHARS:
        assert (stored, received) == (text, None)
    else:
        assert received == len(text) and len(stored) == MAX_ANSWER_CHARS
        assert stored == text[:HEAD_CHARS] + SEAM + text[-TAIL_CHARS:]
        assert stored.startswith(start) and stored.endswith(end)


@pytest.mark.parametrize(
    "text",
    ["short", "a" * (MAX_ANSWER_CHARS + 1), "é😀\r\n" * 70_000, "e\u0301🇫🇷'" * 60_000],
)
def test_an_ingest_cuts_an_answer_as_an_endpoint_s_is_cut(text):
    """DuckDB's cut (ingest) and Python's (an endpoint's answer) keep the same characters."""
    con = duckdb.connect()
    [(cut,)] = con.execute(
        f"SELECT {cut_sql('t')} FROM (SELECT ?::VARCHAR AS t)", [text]
    ).fetchall()
    assert cut == cut_answer(text)[0]


def test_a_cut_answer_is_said_in_the_run_s_log_a_few_times_per_model():
    from numerate.endpoints import answering
    from numerate.kernel.progress import reporting_to
    from tests.notes import Notes

    answering._cuts_said.clear()
    with reporting_to(Notes()) as notes:
        for index in range(answering.CUTS_SAID + 3):
            answering.said_cut("big", f"case-{index}", 31_457_280)
    assert notes.notes[0] == (
        f"model big, case case-0: an answer of 31,457,280 characters is stored cut to "
        f"{MAX_ANSWER_CHARS:,} (its first {HEAD_CHARS:,} and last {TAIL_CHARS:,}), and graded "
        "on what is kept"
    )
    assert len(notes.notes) == answering.CUTS_SAID + 1
    assert notes.notes[-1].startswith("model big: further cut answers are not said here")


WHOLE = (
    "coalesce((SELECT string_agg(piece, '' ORDER BY part) FROM texts WHERE sha = {sha}), {text})"
)
"""SQL: the whole of a stored text (its pieces, for a long one), as docs/schema.md gives it."""

LONG = "<think>" + "w" * 200_000 + " " + "x" * 800_000 + "</think>\nAnswer: 7"
"""An answer of a million characters: one 200,000-character word, then the last line."""


def run_on_a_fake_endpoint(
    folder, reply: Reply, count: int, code: int, asked: list | None = None, **model: object
) -> tuple[object, str]:
    """A run of one model (`model`: its settings) whose endpoint answers `reply` to every
    request, over `count` objects cases, ending with exit `code`: its database and run id.
    `asked` gets every request the endpoint received."""
    from tests.fake_openai import FakeOpenAI

    db = folder / "answers.duckdb"
    with FakeOpenAI() as server:
        server.responder = lambda body: reply
        models = [{"model": "fake", "base_url": server.base_url, **model}]
        config = write_config(
            folder / "run.yaml", models, [{"manifold": "objects", "count": count}]
        )
        done = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
        (asked if asked is not None else []).extend(server.requests)
    assert done.exit_code == code, done.output
    con = duckdb.connect(str(db), read_only=True)
    [(run_id,)] = con.execute("SELECT run_id FROM runs").fetchall()
    con.close()
    return db, run_id


@pytest.fixture(scope="module")
def long_answers(tmp_path_factory):
    """A run whose endpoint answers LONG to every case; the database and the run id."""
    return run_on_a_fake_endpoint(
        tmp_path_factory.mktemp("long"), Reply(content=LONG), 2, 0, name="big"
    )


def test_an_endpoint_s_answer_beyond_the_bound_is_stored_cut_and_graded_on_what_is_kept(
    long_answers,
):
    from numerate.grading.judging import judge
    from numerate.manifolds import registry
    from numerate.planning.plan import case_json
    from numerate.store.queries import CASE_TEXT, CaseText

    db, _ = long_answers
    con = duckdb.connect(str(db), read_only=True)
    stored = con.execute(
        f"SELECT {WHOLE.format(text='r.raw_text', sha='r.raw_sha')}, r.raw_cut, r.raw_chars, "
        f"r.outcome, r.manifold, {CASE_TEXT} FROM responses r JOIN cases c USING (case_id)"
    ).fetchall()
    completions = con.execute(
        f"SELECT length({WHOLE.format(text='text', sha='text_sha')}), text_cut, text_chars "
        "FROM completions"
    ).fetchall()
    con.close()
    assert len(stored) == 2 and completions == [(MAX_ANSWER_CHARS, True, len(LONG))] * 2
    for text, cut, chars, outcome, manifold, *case_text in stored:
        assert (text, cut, chars) == (cut_answer(LONG)[0], True, len(LONG))
        whole = case_json(*CaseText(*case_text))
        case = registry.get(manifold).case_model.model_validate_json(whole)
        assert outcome == judge(manifold, case, text, "stop")[0].value  # what is kept
        assert outcome == judge(manifold, case, LONG, "stop")[0].value  # the same here


def test_pages_fold_a_long_answer_and_offer_the_whole_as_a_download(long_answers):
    from numerate.view.app import create_app

    db, run_id = long_answers
    client = TestClient(create_app(str(db)))
    cases = client.get(f"/run/{run_id}/cases/objects", params={"model": "big"})
    assert cases.status_code == 200 and len(cases.content) < 100_000
    assert (
        "characters not shown" in cases.text and "stored cut: the answer had 1,000," in cases.text
    )
    case_id = cases.text.split("/case?model=big&amp;id=")[1].split('"')[0]
    case = client.get(f"/run/{run_id}/case", params={"model": "big", "id": case_id})
    assert case.status_code == 200 and len(case.content) < 100_000, len(case.content)
    whole = client.get(f"/run/{run_id}/answer", params={"model": "big", "id": case_id})
    assert whole.status_code == 200 and whole.text == cut_answer(LONG)[0]
    assert whole.headers["content-disposition"].startswith("attachment; filename=")
    missing = client.get(f"/run/{run_id}/answer", params={"model": "big", "id": "nope"})
    assert missing.status_code == 404


def test_an_export_folds_long_answers_and_writes_them_whole_beside(long_answers, tmp_path):
    db, _ = long_answers
    out = tmp_path / "export"
    done = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert done.exit_code == 0, done.output
    biggest = max(p.stat().st_size for p in out.rglob("*.html"))
    assert biggest < 200_000
    answers = sorted(out.rglob("answers/*/*.txt"))
    assert len(answers) == 2 and answers[0].read_text() == cut_answer(LONG)[0]
    page = next(p for p in out.rglob("cases/*.html") if "characters not shown" in p.read_text())
    assert f'href="../answers/big/{answers[0].name}" download' in page.read_text()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: `apt-get install chromium`")
def test_a_long_word_wraps_in_a_browser(long_answers):
    """F1: `pre.raw` wrapped at spaces only: a page 1,685,773 px wide."""
    from playwright.sync_api import sync_playwright

    from numerate.view.app import create_app

    db, run_id = long_answers
    client = TestClient(create_app(str(db)))
    cases = client.get(f"/run/{run_id}/cases/objects", params={"model": "big"}).text
    case_id = cases.split("/case?model=big&amp;id=")[1].split('"')[0]
    case = client.get(f"/run/{run_id}/case", params={"model": "big", "id": case_id}).text
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for html in (cases, case):
            page.set_content(html)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        browser.close()


def test_an_answer_body_beyond_the_read_bound_is_an_error_not_read(tmp_path, monkeypatch):
    """A body of any size was read whole into memory before anything was cut (a server
    answering gigabytes, concurrency times over). Past the bound (1 MiB here) it is not read."""
    from numerate.endpoints import limits

    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 2**20)
    big = Reply(content="w" * 2**21)
    asked: list = []
    db, _ = run_on_a_fake_endpoint(tmp_path, big, 1, 3, asked, name="big", max_retries=1)
    con = duckdb.connect(str(db), read_only=True)
    [(outcome, error)] = con.execute("SELECT outcome, error FROM responses").fetchall()
    con.close()
    # it was said as a connection error, and asked again (and paid for) as one
    assert (outcome, error) == ("error", "answer body larger than 1 MiB: not read")
    assert len(asked) == 1


def test_a_body_that_grows_past_the_bound_while_read_is_not_read_on():
    """A body without a length (sent in chunks) is counted as it is read."""
    import asyncio

    from numerate.endpoints.limits import AnswerTooLarge, BoundedStream

    class Chunks:
        def __init__(self) -> None:
            self.sent = 0

        async def __aiter__(self):
            while True:
                self.sent += 1
                yield b"x" * 1000

        async def aclose(self) -> None:
            pass

    async def read() -> int:
        chunks = Chunks()
        with pytest.raises(AnswerTooLarge):
            async for _ in BoundedStream(chunks, 10_000):
                pass
        return chunks.sent

    assert asyncio.run(read()) == 11


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: `apt-get install chromium`")
def test_a_long_label_and_a_long_error_wrap_in_a_browser(tmp_path):
    """The second hostile pass: a 200-character model label (a config takes it) made the runs
    page 3,063 px wide, and an endpoint's 2,000-character error word the run page 5,015 px."""
    from playwright.sync_api import sync_playwright

    from numerate.view.app import create_app

    error = Reply(status=400, error_message="E" * 2000)
    db, run_id = run_on_a_fake_endpoint(tmp_path, error, 1, 3, name="m" * 200, max_retries=0)
    client = TestClient(create_app(str(db)))
    shown = [client.get("/").text, client.get(f"/run/{run_id}").text]
    assert "E" * 400 in shown[1]  # the cause is on the page
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for html in shown:
            page.set_content(html)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        browser.close()


def test_a_list_of_cases_cuts_a_prompt_of_any_size(long_answers, tmp_path):
    """The second hostile pass: a case's input of 12 MB (an ingested case of another generator
    version) made every cases page 12 MB. A list shows a long prompt's beginning."""
    import shutil

    from numerate.view.app import create_app

    db, run_id = long_answers
    copy = tmp_path / "prompts.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE cases SET input = repeat('p', 300000)")
    con.close()
    cases = TestClient(create_app(str(copy))).get(
        f"/run/{run_id}/cases/objects", params={"model": "big"}
    )
    assert cases.status_code == 200 and len(cases.content) < 100_000
    assert "p" * 1_600 + " […]" in cases.text


class Packed:
    """A loopback endpoint (127.0.0.1) that answers its model list and chat requests with
    `body`, gzip-compressed (`encoding`, as given)."""

    def __init__(self, body: bytes, encoding: str = "gzip") -> None:
        import gzip
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        packed = body if encoding == "identity" else gzip.compress(body, 9)
        self.sent: list[int] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def reply(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", encoding)
                self.send_header("Content-Length", str(len(packed)))
                self.end_headers()
                self.wfile.write(packed)

            def do_GET(self) -> None:
                self.reply()

            def do_POST(self) -> None:
                self.sent.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
                self.reply()

        Handler.sent = self.sent  # type: ignore[attr-defined]
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def ask(base_url: str) -> tuple[object, object]:
    """The model list, and the answer to a chat request (its JSON, or the error raised), of
    the endpoint at `base_url`, as a sweep asks them."""
    import asyncio

    from numerate.config.sweep import ModelConfig
    from numerate.endpoints.answerers import chat_body
    from numerate.endpoints.checks import list_models
    from numerate.endpoints.limits import endpoints_in_use, shared_client

    model = ModelConfig(name="m", model="m", base_url=base_url, max_retries=0)

    async def both() -> tuple[object, object]:
        listed = await list_models(model, "key", "the endpoint")
        async with endpoints_in_use():
            client = await shared_client(model)
            try:
                answer: object = await chat_body(client, model="m", messages=[])
            except Exception as error:  # the test reads what was raised
                answer = error
        return listed, answer

    return asyncio.run(both())


def test_a_compressed_answer_is_bounded_by_what_it_unpacks_to(monkeypatch):
    """A hostile pass: the bound counted the bytes on the wire, so 300 KB of gzip was
    unpacked to a 300 MiB answer (1.2 GB of memory; 2.1 GB at 600 MiB), and a model list as
    large was read whole. Unpacked past the bound (1 MiB here), neither is read on."""
    from numerate.endpoints import limits
    from numerate.endpoints.retries import AnswerTooLarge

    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 2**20)
    bomb = b'{"data": [{"id": "' + b"m" * 2**22 + b'"}], "choices": []}'
    with Packed(bomb) as base_url:
        listed, answer = ask(base_url)
    assert listed is None  # no list read: the chat request says what the endpoint answers
    assert isinstance(answer, Exception) and isinstance(answer.__cause__, AnswerTooLarge)
    assert str(answer.__cause__) == "answer body larger than 1 MiB: not read"
    # within the bound, a compressed answer is read as it was sent (unpacked once)
    small = b'{"data": [{"id": "m"}], "choices": [{"message": {"content": "Answer: 7"}}]}'
    with Packed(small) as base_url:
        listed, answer = ask(base_url)
    assert listed == ["m"] and answer == json.loads(small)


@pytest.mark.parametrize("encoding", ["br", "gzip, gzip"])
def test_an_answer_in_an_encoding_never_asked_for_is_not_read(encoding):
    """The clients ask for gzip or deflate: anything else is an error, never read whole by a
    decoder of the HTTP package's own."""
    import openai

    with Packed(b'{"choices": []}', encoding) as base_url:
        listed, answer = ask(base_url)
    assert listed is None
    assert isinstance(answer, openai.APIConnectionError)
    assert f"an answer encoded as {encoding!r}, never asked for" in str(answer.__cause__)


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_body_of_exactly_the_bound_is_read_and_one_byte_more_is_not(monkeypatch, encoding):
    """The bound is "larger than": a second mutation sweep's `>=` on the declared length, and
    one byte less of room while unpacking, passed every test."""
    from numerate.endpoints import limits
    from numerate.endpoints.retries import AnswerTooLarge

    body = b'{"data": [{"id": "m"}], "choices": [{"message": {"content": "7"}}]}' + b" " * 100
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", len(body))
    with Packed(body, encoding) as base_url:
        listed, answer = ask(base_url)
    assert listed == ["m"] and answer == json.loads(body)
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", len(body) - 1)
    with Packed(body, encoding) as base_url:
        listed, answer = ask(base_url)
    assert listed is None and isinstance(answer, Exception)
    assert isinstance(answer.__cause__, AnswerTooLarge)


def test_requests_in_flight_are_bounded_at_twice_the_concurrency():
    """Sent, waiting to be retried, or answered and not yet committed: 2 x `concurrency` (a
    second mutation sweep: halving it passed every test)."""
    import asyncio

    from numerate.config.sweep import ModelConfig
    from numerate.endpoints.limits import endpoints_in_use, model_limits

    model = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9/v1", concurrency=3)

    async def bound() -> int:
        async with endpoints_in_use():
            _, in_flight = model_limits(model)
            taken = 0
            while not in_flight.locked():
                await in_flight.acquire()
                taken += 1
            return taken

    assert asyncio.run(bound()) == 6


def test_a_compressed_body_is_unpacked_a_bound_s_worth_at_a_time():
    """Once what was read reaches the bound exactly, the next piece is unpacked one byte at
    most, then refused: zlib reads a room of 0 as no limit (a third mutation sweep: 8 MiB of
    zeros, 8 KiB packed, were unpacked whole there before the bound was checked)."""
    import asyncio
    import zlib

    from numerate.endpoints.limits import AnswerTooLarge, BoundedStream

    limit = 1000
    pack = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    exact = pack.compress(b"a" * limit) + pack.flush(zlib.Z_SYNC_FLUSH)
    bomb = pack.compress(b"\0" * 2**23) + pack.flush()

    class Measured:
        """zlib's decompressor, the largest piece it gave kept."""

        def __init__(self) -> None:
            self.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.largest = 0

        @property
        def unconsumed_tail(self) -> bytes:
            return self.inflate.unconsumed_tail

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            piece = self.inflate.decompress(data, max_length)
            self.largest = max(self.largest, len(piece))
            return piece

        def flush(self) -> bytes:
            return self.inflate.flush()

    class Chunks:
        async def __aiter__(self):
            yield exact
            yield bomb

    async def read(inflate: Measured) -> bytes:
        body = b""
        with pytest.raises(AnswerTooLarge):
            async for piece in BoundedStream(Chunks(), limit, inflate):
                body += piece
        return body

    inflate = Measured()
    assert asyncio.run(read(inflate)) == b"a" * limit
    assert inflate.largest <= limit + 1


@pytest.mark.parametrize("headers", [{"content-length": str(2**40)},
                                     {"content-encoding": "br"}])  # fmt: skip
def test_a_body_refused_before_it_is_read_is_closed(headers):
    """Its connection goes back to no pool half read (a third mutation sweep: a declared
    length past the bound left it open)."""
    import asyncio

    import httpx2 as httpx

    from numerate.endpoints.limits import bound_body

    class Unread(httpx.AsyncByteStream):
        closed = False

        async def __aiter__(self):
            yield b"{}"

        async def aclose(self) -> None:
            self.closed = True

    stream = Unread()
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(200, headers=headers, stream=stream, request=request)
    with pytest.raises(Exception, match=r"larger than 64 MiB|never asked for"):
        asyncio.run(bound_body(response))
    assert stream.closed
