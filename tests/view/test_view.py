"""`numerate view` over a real database (tests/view/conftest.py), read through the app's HTTP
interface, and exported. What a page shows is checked against the database read directly."""

import contextlib
import html
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import duckdb
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from numerate.cli import app
from numerate.view.app import create_app
from numerate.view.pages import PAGE_SIZE, pager
from tests.view.conftest import sql, start_view
from tests.waiting import wait_until, waits_for_the_database

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(results):
    return TestClient(create_app(str(results[0])))


def links(page: str, pattern: str = "") -> list[str]:
    found = [html.unescape(h) for h in re.findall(r'href="([^"]+)"', page)]
    return [h for h in found if pattern in h]


def test_the_runs_page_lists_every_run_newest_first_and_filters(client, results):
    db, (first, second) = results
    page = client.get("/")
    assert page.status_code == 200
    assert page.text.index(second) < page.text.index(first)
    answers = sql(db, "SELECT count(*) FROM responses WHERE run_id = ?", second)[0][0]
    assert f"{answers:,}" in page.text
    assert first not in client.get("/", params={"q": second[-6:]}).text
    assert "no run matches" in client.get("/", params={"status": "running"}).text


def test_a_run_whose_process_is_gone_is_shown_stopped_and_not_reloaded(tmp_path):
    """A killed run was listed `running`, its pages reloading every 5 s for ever, while
    `numerate report` said it had stopped without ending (numerate.store.browse.STOPPED)."""
    from numerate.store import Store

    db = tmp_path / "r.duckdb"
    store = Store.open(str(db))
    store.start_run("gone-1", "s", "h", {}, "v")  # recorded running
    store.start_numgen_run("numgen-gone", "benchmark", "synthetic", "blobs", {}, "v")
    Store.close_all()  # their process gone: their claims let go
    client = TestClient(create_app(str(db)))
    listed = client.get("/").text
    assert 'class="badge stopped">stopped<' in listed and "badge running" not in listed
    assert "refresh" not in listed  # nothing goes on
    assert "gone-1" in client.get("/", params={"status": "stopped"}).text
    assert "no run matches" in client.get("/", params={"status": "running"}).text
    page = client.get("/run/gone-1").text
    assert 'class="badge stopped">stopped<' in page and "the same command resumes it" in page
    assert "refresh" not in page
    for numgen in ("/numgen", "/numgen/numgen-gone"):
        shown = client.get(numgen).text
        assert 'class="badge stopped">stopped<' in shown and "refresh" not in shown, numgen


def test_a_run_shows_its_leaderboard_parts_and_a_comparison_link(client, results):
    db, (first, second) = results
    page = client.get(f"/run/{second}").text
    accuracy = sql(
        db, "SELECT accuracy, ci_low, ci_high FROM summaries WHERE run_id = ? AND model = 'm' "
        "AND manifold = 'objects'", second,
    )[0]  # fmt: skip
    low, high = f"{accuracy[1]:.3f}", f"{accuracy[2]:.3f}"
    assert f'{accuracy[0]:.3f}</span> <span class="ci">[{low}, {high}]' in page
    assert "Each model" in page and ">ok<" in page
    assert links(page, "/compare") == [f"/compare?base={first}&new={second}"]
    assert len(links(page, "/manifold/")) == 2


def test_a_manifold_has_a_curve_per_parameter_and_a_heatmap_whose_cells_open_their_cases(
    client, results
):
    db, (_first, second) = results
    page = client.get(f"/run/{second}/manifold/objects").text
    assert page.count('<svg class="curve"') == 2  # length, distractor_count
    cells = links(page, "point=")
    points = sql(db, "SELECT count(*) FROM points WHERE run_id = ? AND manifold = 'objects'",
                 second)  # fmt: skip
    assert len(cells) == points[0][0] == 2 * 4  # models x grid points
    for cell in cells:
        cases = client.get(cell)
        assert cases.status_code == 200
        model = re.search(r"model=([^&]+)", cell)[1]
        key = unquote(re.search(r"point=([^&]+)", cell)[1])
        shown = len(re.findall(r'class="case-link"', cases.text))
        stored = sql(
            db, "SELECT count(*) FROM responses WHERE run_id = ? AND model = ? AND point_key = ?",
            second, model, key,
        )[0][0]  # fmt: skip
        assert shown == stored == 30
    curve_points = links(page, "&x=")
    assert len(curve_points) == 2 * (2 + 2)  # models x (2 lengths + 2 distractor counts)
    assert client.get(curve_points[0]).status_code == 200


def test_cases_filter_by_outcome_and_text_and_page(client, results):
    db, (_first, second) = results
    address = f"/run/{second}/cases/objects"
    wrong = client.get(address, params={"model": "m", "outcome": "wrong"}).text
    outcomes = set(re.findall(r'<span class="badge (\w+)">\1</span></td>', wrong))
    assert outcomes == {"wrong"}
    stored = sql(
        db, "SELECT count(*) FROM responses WHERE run_id = ? AND model = 'm' "
        "AND manifold = 'objects' AND outcome = 'wrong'", second,
    )[0][0]  # fmt: skip
    assert f"{stored:,} answers" in wrong
    every = client.get(address, params={"model": "m"}).text
    assert "page 1 of 3" in every and len(re.findall('class="case-link"', every)) == PAGE_SIZE
    last = client.get(address, params={"model": "m", "page": 99}).text
    assert "page 3 of 3" in last and len(re.findall('class="case-link"', last)) == 120 - 2 * 50
    target = sql(db, "SELECT target FROM cases LIMIT 1")[0][0]
    searched = client.get(address, params={"model": "m", "q": "zzz-no-such-text"}).text
    assert "no case matches" in searched
    assert target in client.get(address, params={"model": "m", "q": target}).text


def test_a_case_shows_its_prompt_target_and_every_answer(client, results):
    db, (_first, second) = results
    case_id, prompt, target, raw = sql(
        db, "SELECT r.case_id, c.input, c.target, r.raw_text FROM responses r JOIN cases c "
        "USING (case_id) WHERE r.run_id = ? AND r.model = 'm' LIMIT 1", second,
    )[0]  # fmt: skip
    page = client.get(f"/run/{second}/case", params={"model": "m", "id": case_id})
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert prompt in text and target in text and raw in text


def test_an_answers_control_characters_are_shown_escaped_not_acted_on(results, tmp_path):
    """A model's answer holding a U+202E (it turns the rest of the cell round), a terminal's
    escape sequence and markup: the page shows each as text (`\\u202e`, `\\x1b`, `<b>`), its
    line breaks kept, and holds none of those characters. A latency of 1e300 s (a shard may
    bring one) is a short figure, not 300 digits."""
    import shutil

    db, (_first, second) = results
    copy = shutil.copy(db, tmp_path / "r.duckdb")
    case_id = sql(copy, "SELECT case_id FROM responses WHERE run_id = ? AND model = 'm' "
                  "ORDER BY case_id LIMIT 1", second)[0][0]  # fmt: skip
    hostile = "<b>7</b>\u202eevil\x1b[2J\nsecond line\u2066"
    con = duckdb.connect(str(copy))
    con.execute("UPDATE responses SET raw_text = ?, latency_s = 1e300 WHERE run_id = ? "
                "AND case_id = ?", [hostile, second, case_id])  # fmt: skip
    con.close()
    page = TestClient(create_app(str(copy))).get(
        f"/run/{second}/case", params={"model": "m", "id": case_id}
    )
    assert page.status_code == 200
    assert not any(c in page.text for c in "\u202e\x1b\u2066"), (
        "a control character reached the page"
    )
    shown = html.unescape(page.text)
    assert "<b>7</b>\\u202eevil\\x1b[2J\nsecond line\\u2066" in shown
    assert "1.00e+300 s" in shown and "0" * 20 not in shown


def test_a_search_is_kept_in_its_form_as_it_was_asked(client, results):
    """A review: the pages write a value's bidi control as its escape, and a form's value
    was written so too: sent again, the search was for other text. A form keeps it."""
    _db, (_first, second) = results
    asked = "7\u202e3"
    page = client.get(f"/run/{second}/cases/objects", params={"model": "m", "q": asked})
    assert page.status_code == 200
    assert f'name="q" value="{asked}"' in page.text
    runs = client.get("/", params={"q": asked, "sweep": asked}).text
    assert f'name="q" value="{asked}"' in runs and f'name="sweep" value="{asked}"' in runs


def test_a_comparison_lists_the_cases_lost_with_links_to_both_answers(client, results):
    db, (first, second) = results
    page = client.get("/compare", params={"base": first, "new": second}).text
    lost = sql(
        db, "SELECT count(*) FROM responses b JOIN responses n USING (model, case_id, "
        "sample_index) WHERE b.run_id = ? AND n.run_id = ? AND b.outcome = 'correct' "
        "AND n.outcome IN ('wrong', 'unparsed', 'truncated')", first, second,
    )[0][0]  # fmt: skip
    assert lost > 50
    assert f'Lost: right in the base run, wrong in the new <span class="sub">{lost:,}<' in page
    assert "regression" in page  # the verdict of `numerate compare`
    answer = links(page, f"/run/{second}/case")[0]
    assert client.get(answer).status_code == 200


def test_garbage_is_a_page_that_says_why_never_a_traceback(client, results):
    _db, (_first, second) = results
    assert client.get("/run/nosuch").status_code == 404
    bad = client.get(f"/run/{second}/cases/objects", params={"model": "m", "outcome": "x"})
    assert bad.status_code == 400 and "outcome" in bad.text
    assert client.get(f"/run/{second}/cases/objects").status_code == 400  # no model
    assert client.get(f"/run/{second}/manifold/nosuch").status_code == 404
    for query, said in (
        ({"x": "length", "v": "\"'"}, "not a grid parameter"),
        ({"x": "length", "v": "9" * 5000}, "not a grid parameter"),
        ({"x": "length", "v": "9" * 9000}, "v: longer than 8,192 characters"),
    ):
        bad = client.get(f"/run/{second}/cases/objects", params={"model": "m", **query})
        assert bad.status_code == 400 and said in bad.text
    assert client.get("/compare").status_code == 400
    assert client.get("/numgen/x/cell", params={"target": "-1", "count": "1"}).status_code == 400
    for value in ("²", "١", "abc", "-1", "0", "1e3"):  # "²": a digit to str.isdigit
        page = client.get(f"/run/{second}/cases/objects", params={"model": "m", "page": value})
        assert page.status_code == 400 and "page" in page.text, value  # it showed page 1
        assert client.get("/numgen/x/cell", params={"target": value}).status_code == 400
    cases = f"/run/{second}/cases/objects"
    nobody = client.get(cases, params={"model": "nobody"})
    assert nobody.status_code == 404 and "no answers of model" in nobody.text  # was "no case"
    nowhere = client.get(cases, params={"model": "m", "point": "garbage"})
    assert nowhere.status_code == 404 and "no grid point" in nowhere.text
    for query in ({"x": "nosuch", "v": "1"}, {"x": "length", "v": "999"}):  # 200, "0 answers"
        nowhere = client.get(cases, params={"model": "m", **query})
        assert nowhere.status_code == 404 and "no grid point of objects where" in nowhere.text
    for query in ({"x": "length"}, {"v": "2"}):  # one without the other was silently ignored
        half = client.get(cases, params={"model": "m", **query})
        assert half.status_code == 400 and "needs both x=PARAMETER and v=VALUE" in half.text
    nul = client.get(cases, params={"model": "m", "point": "\x00"})
    assert nul.status_code == 400 and "\x00" not in nul.text  # it was written into the page
    reflected = client.get(f"/run/{second}/cases/objects", params={"model": "m", "q": "<b>x"})
    assert "<b>x" not in reflected.text and "&lt;b&gt;x" in reflected.text
    # before: a run compared with itself (all "no change"), a status that is none (no runs
    # listed), a page that is not there (Starlette's bare "Not Found") were all answered
    itself = client.get("/compare", params={"base": second, "new": second})
    assert itself.status_code == 400 and "compared with itself" in itself.text
    bogus = client.get("/", params={"status": "bogus"})
    assert bogus.status_code == 400 and "status &#39;bogus&#39;: choose running" in bogus.text
    assert client.get("/", params={"status": "finished"}).status_code == 200
    for missing in ("/nosuchpage", "/%ff", "/run/..%2F..", "/run/x/y/z/w"):
        gone = client.get(missing)
        assert gone.status_code == 404 and "no page at" in gone.text and "<html" in gone.text


def test_nothing_can_be_changed_and_the_database_is_not_held(client, results):
    db, (_first, second) = results
    before = db.stat().st_mtime_ns
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)(f"/run/{second}").status_code == 405
    assert client.head("/").status_code == 200
    client.get(f"/run/{second}")
    assert db.stat().st_mtime_ns == before
    con = duckdb.connect(str(db))  # a writer gets the file between two pages
    con.close()


def test_numgen_runs_their_confusion_matrix_and_the_images_of_a_cell(client, results):
    db, _ = results
    ((run_id, accuracy),) = sql(db, "SELECT run_id, accuracy FROM numgen_metrics")
    listed = client.get("/numgen").text
    assert run_id in listed and f"<b>{accuracy:.3f}</b>" in listed
    page = client.get(f"/numgen/{run_id}").text
    cells = links(page, "/cell?")
    diagonal = sql(db, "SELECT count(DISTINCT target) FROM numgen_images WHERE run_id = ?", run_id)
    assert len(cells) == diagonal[0][0] == 10  # synthetic images: every count right
    cell = client.get(cells[2]).text
    assert "Asked for 3, counted 3" in cell
    images = re.findall(r'src="([^"]+)"', cell)
    assert len(images) == 2
    for image in images:
        answer = client.get(html.unescape(image))
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
        assert answer.content.startswith(b"\x89PNG")


def test_only_images_the_database_records_are_served(client, results):
    db, _ = results
    ((run_id, prompt_id),) = sql(db, "SELECT run_id, prompt_id FROM numgen_images LIMIT 1")
    assert client.get(f"/numgen/{run_id}/image/{prompt_id}").status_code == 200
    for address in (
        f"/numgen/{run_id}/image/..%2F..%2Fetc%2Fpasswd",
        f"/numgen/{run_id}/image/nosuch",
        f"/numgen/other/image/{prompt_id}",
        "/numgen/x/image/../../../../etc/passwd",
    ):
        assert client.get(address).status_code == 404, address


def test_pager_clamps_to_the_pages_there_are():
    assert pager(0, 0).page == 1 and pager(5, 120).page == 3 and pager(2, 120).offset == PAGE_SIZE


def test_the_export_is_a_folder_whose_every_link_lands(results, tmp_path):
    db, (first, _second) = results
    out = tmp_path / "export"
    done = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert done.exit_code == 0, done.output
    files = sorted(out.rglob("*.html"))
    assert (out / "index.html") in files and len(files) > 20
    for file in files:
        text = file.read_text()
        assert "http://" not in text.replace("http://www.w3.org", "")  # nothing fetched
        assert str(db) not in text and f"export of {Path(db).name}" in text  # no folder of ours
        sources = [html.unescape(src) for src in re.findall(r'src="([^"]+)"', text)]
        for link in links(text) + [src for src in sources if not src.startswith("data:")]:
            path, _, anchor = link.partition("#")
            target = (file.parent / path).resolve() if path else file
            assert target.is_file(), f"{file.relative_to(out)} links to missing {link}"
            if anchor:
                assert f'id="{anchor}"' in target.read_text(), f"{link}: no such anchor"
    assert any(first in f.read_text() and "Lost" in f.read_text() for f in out.glob("compare/*"))
    assert len(list(out.glob("numgen/*/images/*.png"))) == 20  # 10 numbers x 2 images
    again = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])  # over itself
    assert again.exit_code == 0


def test_bad_command_lines_are_one_line(results, tmp_path):
    db, _ = results
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    for arguments, message in (
        (["--db", str(tmp_path / "none.duckdb")], "no results database"),
        (["--db", str(db), "--export", str(tmp_path / "other")], "other files in it"),
        (["--db", str(db), "--port", "70000"], "65535"),
        (["--db", str(db), "--host", ""], "--host '': give an address"),
        (
            ["--db", str(db), "--export", str(tmp_path / "e"), "--port", "9999"],
            "--port: --export writes files and serves nothing",
        ),
        (
            ["--db", str(db), "--export", str(tmp_path / "e"), "--host", "0.0.0.0"],
            "--host: --export writes files",
        ),
        (["--db", str(db), "--host", "nosuch.invalid"], "cannot serve on nosuch.invalid"),
        (
            ["--db", str(db), "--export", str(tmp_path / "other" / "keep.txt" / "x")],
            "keep.txt is a file, not a folder",
        ),
        (["--db", str(db), "--export", str(tmp_path / ("a" * 300))], "File name too long"),
        (["--db", str(db), "--export", "/proc/numerate-export"], "cannot write there"),
    ):
        done = runner.invoke(app, ["view", *arguments])
        assert done.exit_code == 2, done.output
        assert message in done.output


def test_the_server_serves_on_127_0_0_1_and_stops_on_sigint(results):
    import signal
    import urllib.error
    import urllib.request

    db, _ = results
    server, address = start_view(db)
    try:
        with urllib.request.urlopen(address, timeout=5) as answer:
            assert answer.status == 200 and b"Runs" in answer.read()
        port = address.rsplit(":", 1)[1]
        busy = runner.invoke(app, ["view", "--db", str(db), "--port", port])
        assert busy.exit_code == 2 and "cannot serve" in busy.output
        rebound = urllib.request.Request(address, headers={"Host": f"evil.example:{port}"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # DNS rebinding gets nothing
            urllib.request.urlopen(rebound, timeout=5)
        assert refused.value.code == 400
        server.send_signal(signal.SIGINT)
        assert server.wait(10) == 130
        said = server.stderr.read()
        assert "Traceback" not in said and said.strip().endswith("interrupted")
    finally:
        server.kill()


def test_many_connections_that_never_send_their_request_leave_the_viewer_answering(results):
    """At 512 open files (64 connections: numerate.view.connections), 300 connections that send
    a request line and nothing more: those past 64 are answered 503 at once, those kept are
    closed once their head is late, and the viewer then answers, with one warning and no
    traceback (before: every connection was kept for good, and past the file limit asyncio
    logged a traceback per connection it failed to accept, and answered no one)."""
    import socket
    import urllib.error
    import urllib.request

    from numerate.view.connections import HEAD_SECONDS

    db, _ = results
    server, address = start_view(db, files=512)
    held = []
    try:
        port = int(address.rsplit(":", 1)[1])
        started = time.monotonic()
        for _ in range(300):
            connection = socket.create_connection(("127.0.0.1", port), timeout=HEAD_SECONDS + 10)
            connection.sendall(b"GET / HTTP/1.1\r\n")  # and never the rest
            held.append(connection)
        with pytest.raises(urllib.error.HTTPError) as busy:
            urllib.request.urlopen(address, timeout=5)
        assert busy.value.code == 503
        said = [connection.recv(200) for connection in held]  # each answered or closed in time
        assert len([s for s in said if s.startswith(b"HTTP/1.1 503 ")]) >= 300 - 64
        kept = [c for c, s in zip(held, said, strict=True) if s == b""]
        assert len(kept) == 64 and time.monotonic() - started < HEAD_SECONDS + 10
        with urllib.request.urlopen(address, timeout=5) as answer:
            assert answer.status == 200
        assert said_once_stopped(server) == [bound_reached(64), "interrupted"]
    finally:
        for connection in held:
            connection.close()
        server.kill()


def test_upgrades_and_garbage_neither_use_up_the_connections_nor_fill_the_terminal(results):
    """A review of the bounds: a WebSocket upgrade handed its connection past them (uvicorn
    swaps the protocol), so each one closed was still counted, and 16 of them (at 64 open
    files) left the viewer answering 503 for good; and each request uvicorn cannot read, or
    cannot upgrade, was a warning line on the terminal."""
    import signal
    import socket
    import urllib.request

    db, _ = results
    server, address = start_view(db, files=64)  # 8 connections at most
    try:
        port = int(address.rsplit(":", 1)[1])
        upgrade = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                   b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   b"Sec-WebSocket-Version: 13\r\n\r\n")  # fmt: skip
        answers = []
        for request in [upgrade] * 40 + [b"NONSENSE\r\n\r\n"] * 40:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
                connection.sendall(request)
                answers.append(connection.recv(12))
        assert set(answers) == {b"HTTP/1.1 200", b"HTTP/1.1 400"}, set(answers)
        with urllib.request.urlopen(address, timeout=5) as answer:
            assert answer.status == 200
        server.send_signal(signal.SIGINT)
        assert server.wait(10) == 130
        assert server.stderr.read().splitlines()[1:] == ["interrupted"]
    finally:
        server.kill()


def test_a_stream_of_connections_past_the_bound_does_not_run_the_viewer_out_of_files(results):
    """A review of the bounds: at 64 open files (8 connections), connections opened, sent a
    request and closed unread in a loop while the 8 are held: asyncio accepted as many as the
    bound each turn and those refused live three turns, so at a quarter of the files (16) the
    viewer ran out of them and
    logged a traceback at each failed accept (and a page's error could not be read from its
    template). Now: no more than its files, and nothing said but the bound."""
    import socket
    import threading

    db, _ = results
    server, address = start_view(db, files=64)
    port = int(address.rsplit(":", 1)[1])
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
    try:
        wait_until(lambda: "connections are open" in busy_answer(port), what="the bound")
        end = time.monotonic() + 4

        def stream() -> None:
            while time.monotonic() < end:
                with contextlib.suppress(OSError):
                    connection = socket.create_connection(("127.0.0.1", port), timeout=2)
                    connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    connection.close()

        threads = [threading.Thread(target=stream) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for connection in held:
            connection.close()
        wait_until(lambda: page_status(address) == 200, what="the viewer answers again")
        assert said_once_stopped(server) == [bound_reached(8), "interrupted"]
    finally:
        for connection in held:
            connection.close()
        server.kill()


def bound_reached(most: int) -> str:
    """The viewer's line when `most` connections are open."""
    return (f"warning: {most} connections are open; new ones are answered 503 until some close "
            "(a client that opens many and sends slowly?)")  # fmt: skip


def said_once_stopped(server: subprocess.Popen) -> list[str]:
    """What the viewer `server` said after its first line, once stopped with Ctrl-C."""
    import signal

    server.send_signal(signal.SIGINT)
    assert server.wait(10) == 130
    return server.stderr.read().splitlines()[1:]


def page_status(address: str) -> int:
    """The status the viewer's first page at `address` is answered with (0: none)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(address, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def busy_answer(port: int) -> str:
    """What a new connection to the viewer on `port` is answered first ('' when nothing)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return connection.recv(1000).decode(errors="replace")


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_signal_while_a_page_waits_for_a_held_database_says_only_that(results, stop):
    """Before: uvicorn cancelled the page at shutdown and printed `Cancel 1 running task(s)`
    and a CancelledError traceback under `interrupted`. The page now gives up at the signal."""
    import signal
    import threading
    import urllib.request

    db, _ = results
    server, address = start_view(db)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); time.sleep(60)", str(db)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"

        def ask() -> None:  # a page that waits for the file (its answer cut off by the stop)
            with contextlib.suppress(OSError):
                urllib.request.urlopen(address, timeout=30).close()

        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(server.stderr), daemon=True)
        reader.start()
        threading.Thread(target=ask, daemon=True).start()
        wait_until(lambda: waits_for_the_database(db, server.pid), what="the page waits")
        wait_until(lambda: any("waiting for results database" in line for line in lines),
                   what="the page says it waits")  # after a second of it  # fmt: skip
        server.send_signal(getattr(signal, stop))
        assert server.wait(10) == (130 if stop == "SIGINT" else 143)
        reader.join(10)  # to the end of what it said
        said = "".join(lines)
        assert "Traceback" not in said and "Cancel" not in said and "ERROR" not in said, said
        assert said.strip().endswith("interrupted" if stop == "SIGINT" else "terminated")
    finally:
        server.kill()
        holder.kill()


@pytest.mark.slow
def test_pages_of_a_run_that_is_going_update_themselves_while_it_writes(tmp_path):
    """A sweep writing for a while in another process: the viewer reads the same file (no
    copy) while it runs, shows the run as running with its answers so far, on pages that reload
    themselves, and never stops the sweep."""

    from tests.cli.test_run import numerate_env, slow_sweep, start_sweep

    config, endpoint, _ = slow_sweep(tmp_path, count=200, delay=0.05, batch_size=20)
    db = tmp_path / "live.duckdb"
    sweep = start_sweep(config, db, numerate_env(tmp_path / "prefect"))
    client = TestClient(create_app(str(db)))
    try:
        deadline = time.monotonic() + 120
        while True:
            assert sweep.poll() is None, "the sweep ended before it was read"
            assert time.monotonic() < deadline, "the viewer never saw the run going"
            runs = client.get("/")
            if runs.status_code == 200 and 'class="badge running"' in runs.text:
                break
            time.sleep(0.5)
        assert '<meta http-equiv="refresh" content="5">' in runs.text
        run_id = re.search(r'href="/run/([^"]+)"', runs.text)[1]
        while "Answers by outcome" not in (going := client.get(f"/run/{run_id}").text):
            assert sweep.poll() is None and time.monotonic() < deadline, "no answer seen"
            time.sleep(0.5)
        assert '<meta http-equiv="refresh"' in going and 'class="badge running"' in going
        assert sweep.poll() is None  # read while the sweep was writing the file
        assert sweep.wait(timeout=300) == 0
    finally:
        sweep.kill()
        endpoint.kill()
        endpoint.wait()
    done = client.get(f"/run/{run_id}").text
    assert '<meta http-equiv="refresh"' not in done and "Leaderboard" in done


def test_an_export_that_reads_for_long_lets_a_writing_sweep_in(tmp_path):
    """An export holds the database for minutes on a large one. While it reads, a sweep in
    another process writes the same file: each of the sweep's sessions waits for a page or two
    of the export, never for the whole of it (the export lets the file go when a writer knocks:
    without it, a session waited the export's 2.1 s here), and the sweep finishes. Bounded by
    the export's own length, not by seconds, which a loaded machine stretches."""
    import json

    from numerate.store.reader import Reader
    from numerate.view.app import templates
    from numerate.view.export import export
    from tests.cli.test_run import numerate_env, slow_sweep, start_sweep

    config, endpoint, _ = slow_sweep(tmp_path, count=100, delay=0.05, batch_size=20)
    db, lock_log = tmp_path / "live.duckdb", tmp_path / "locks.jsonl"
    env = numerate_env(tmp_path / "prefect") | {"NUMERATE_LOCK_LOG": str(lock_log)}
    sweep = start_sweep(config, db, env)
    try:
        deadline = time.monotonic() + 120
        while answers(db) < 20:
            assert sweep.poll() is None and time.monotonic() < deadline, "the sweep never wrote"
            time.sleep(0.2)
        started = time.time()
        with Reader.open(str(db)) as reader:  # pages written slowly: the export holds on
            done = export(reader, tmp_path / "out", templates(), lambda page: time.sleep(0.4),
                             between=reader.let_writers_in)  # fmt: skip
        ended = time.time()
        assert sweep.wait(timeout=300) == 0
    finally:
        sweep.kill()
        endpoint.kill()
        endpoint.wait()
    assert done.files >= 3 and not done.unshown and ended - started > 1.2
    sessions = [json.loads(line) for line in lock_log.read_text().splitlines()]
    during = [s for s in sessions if started < s["at"] < ended + 1 and s["kind"] == "write"]
    assert during, "the sweep wrote nothing while the export read"
    assert max(s["waited_s"] for s in during) < (ended - started) / 2, (ended - started, during)
    assert "Traceback" not in "".join(p.read_text() for p in (tmp_path / "out").rglob("*.html"))


def test_an_export_of_a_run_not_summed_up_yet_says_so_on_that_page(results, tmp_path):
    """A live run's manifold has answers before its grid points are summed up: its page in
    an export says so (as the server's would), and the export goes on."""
    import shutil

    db, (first, _) = results
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("DELETE FROM points WHERE run_id = ? AND manifold = 'objects'", [first])
    con.close()
    done = runner.invoke(app, ["view", "--db", str(copy), "--export", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    pages = {str(p): p.read_text() for p in (tmp_path / "out").rglob("*.html")}
    said = [name for name, text in pages.items() if "has no grid point of manifold" in text]
    assert len(said) == 1 and "Traceback" not in "".join(pages.values())


def test_a_page_a_library_panics_on_says_so_in_a_line_served_and_exported(results, tmp_path):
    """polars panics on a start time of infinity (a database changed by hand), and its panic
    is no Exception: the runs page says it could not be shown, as for any other failure,
    served (it was Starlette's bare 500 and a traceback in the log) and in an export."""
    import shutil

    db, _ = results
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE runs SET started_at = 'infinity'")
    con.close()
    page = TestClient(create_app(str(copy)), raise_server_exceptions=False).get("/")
    assert page.status_code == 500 and "could not show this page: " in page.text
    assert "overflow" in page.text
    done = runner.invoke(app, ["view", "--db", str(copy), "--export", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    runs = (tmp_path / "out" / "index.html").read_text()
    assert "could not show this page: " in runs and "overflow" in runs


def test_figures_no_run_can_have_are_said_on_their_pages_served_and_exported(results, tmp_path):
    """A point changed by hand (n -10) is said on the pages that show it, served and
    exported, naming it; the export writes every other page (its listing of the case pages
    read those figures outside any page, and stopped the whole export)."""
    import shutil

    db, (first, _) = results
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE points SET n = -10 WHERE run_id = ? AND manifold = 'objects'", [first])
    con.close()
    said = f"run {first}: model h, objects point "
    page = TestClient(create_app(str(copy)), raise_server_exceptions=False).get(
        f"/run/{first}/manifold/objects"
    )
    assert page.status_code == 500 and said in html.unescape(page.text)
    assert "holds n -10, figures no run can have" in html.unescape(page.text)
    done = runner.invoke(app, ["view", "--db", str(copy), "--export", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    out = tmp_path / "out"
    shown = {str(p.relative_to(out)): html.unescape(p.read_text()) for p in out.rglob("*.html")}
    assert [name for name, text in shown.items() if said in text], sorted(shown)
    assert "index.html" in shown and any("cases" in name for name in shown), sorted(shown)
    # a NumGen run's figures too (its page showed a knower level of -7 without a word)
    con = duckdb.connect(str(copy))
    [(numgen,)] = con.execute("SELECT run_id FROM numgen_metrics").fetchall()
    con.execute("UPDATE numgen_metrics SET knower_level = -7")
    con.close()
    page = TestClient(create_app(str(copy)), raise_server_exceptions=False).get(f"/numgen/{numgen}")
    assert page.status_code == 500 and (
        f"NumGen run {numgen} holds knower_level -7, figures no run can have" in page.text
    )


def test_a_model_with_nothing_scored_and_images_gone_still_have_their_pages(results, tmp_path):
    """A model whose every answer was an error has no rates (NULL), an image file may be
    moved or removed, and a path the database was made to hold may be no image: the pages
    show them as such, the export too, and nothing but images is ever copied."""
    import shutil

    db, (first, _) = results
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute(
        "UPDATE summaries SET unparsed_rate = NULL, truncation_rate = NULL, "
        "error_rate = 1.0, accuracy = NULL WHERE run_id = ? AND model = 'm'",
        [first],
    )
    images = con.execute(
        "SELECT prompt_id, path FROM numgen_images ORDER BY prompt_index"
    ).fetchall()
    (gone_id, gone), (secret_id, _), (linked_id, linked) = images[0], images[1], images[2]
    shutil.move(gone, tmp_path / "moved.png")
    shutil.move(linked, tmp_path / "elsewhere.png")  # kept on another disk, linked back:
    os.symlink(tmp_path / "elsewhere.png", linked)  # not followed, and said to be a link
    con.execute("UPDATE numgen_images SET path = '/etc/passwd' WHERE prompt_id = ?", [secret_id])
    con.close()
    try:
        client = TestClient(create_app(str(copy)))
        assert client.get(f"/run/{first}").status_code == 200
        cells = sql(
            copy,
            "SELECT i.run_id, i.target, d.count FROM numgen_images i JOIN "
            "numgen_detections d USING (run_id, prompt_id) WHERE prompt_id = ?",
            gone_id,
        )
        ((run_id, target, count),) = cells
        cell = client.get(f"/numgen/{run_id}/cell", params={"target": target, "count": count})
        assert cell.status_code == 200 and "image not shown: the file is missing" in cell.text
        ((run_id, target, count),) = sql(
            copy,
            "SELECT i.run_id, i.target, d.count FROM numgen_images i JOIN "
            "numgen_detections d USING (run_id, prompt_id) WHERE prompt_id = ?",
            linked_id,
        )
        cell = client.get(f"/numgen/{run_id}/cell", params={"target": target, "count": count})
        assert cell.status_code == 200  # it was "image file missing" (it is there, a link)
        name = Path(linked).relative_to(Path(linked).parents[2]).as_posix()  # images/.../x.png
        said = f"image not shown: {name}: a symbolic link, which numerate view does not follow"
        shown = html.unescape(cell.text)
        assert said in shown and "follows no link out of" not in shown  # no path of here
        assert client.get(f"/numgen/{run_id}/image/{linked_id}").status_code == 403
        assert client.get(f"/numgen/{run_id}/image/{secret_id}").status_code == 404
        out = tmp_path / "out"
        done = runner.invoke(app, ["view", "--db", str(copy), "--export", str(out)])
        assert done.exit_code == 0 and "could not be shown" not in done.output, done.output
        copied = list(out.glob("numgen/*/images/*.png"))
        assert len(copied) == len(images) - 3 and all(
            b"root:" not in p.read_bytes() for p in copied
        )
    finally:
        shutil.move(tmp_path / "moved.png", gone)
        os.unlink(linked)
        shutil.move(tmp_path / "elsewhere.png", linked)


def test_an_export_again_replaces_what_it_wrote_and_nothing_else(results, tmp_path):
    """Exporting into the same folder again removes the pages of runs gone since (those the
    folder's .numerate-export lists), keeps a file of the user's; a folder with an index.html
    of something else is refused."""
    db, _ = results
    out = tmp_path / "out"
    assert runner.invoke(app, ["view", "--db", str(db), "--export", str(out)]).exit_code == 0
    stale = out / "runs" / "gone-run" / "index.html"
    stale_case = out / "runs" / "gone-run" / "cases" / "objects" / "p1.html"
    stale_case.parent.mkdir(parents=True)
    stale.write_text("old")
    stale_case.write_text("old")
    listed = (out / ".numerate-export").read_text()
    (out / ".numerate-export").write_text(
        listed + "runs/gone-run/index.html\nruns/gone-run/cases/objects/p1.html\n"
    )
    (out / "notes.txt").write_text("mine")
    (out / "runs" / "mine").mkdir()  # a folder of the user's, empty: kept
    assert runner.invoke(app, ["view", "--db", str(db), "--export", str(out)]).exit_code == 0
    assert not (out / "runs" / "gone-run").exists()  # no empty cases/ folders left behind
    assert (out / "notes.txt").read_text() == "mine" and (out / "runs" / "mine").is_dir()
    assert (out / ".numerate-export").read_text() == listed
    other = tmp_path / "site"
    other.mkdir()
    (other / "index.html").write_text("<h1>my site</h1>")
    refused = runner.invoke(app, ["view", "--db", str(db), "--export", str(other)])
    assert refused.exit_code == 2 and "other files in it" in refused.output
    dangling = tmp_path / "dangling"  # corpus I: "cannot write there (File exists)"
    dangling.symlink_to(tmp_path / "gone" / "site")
    refused = runner.invoke(app, ["view", "--db", str(db), "--export", str(dangling)])
    assert refused.exit_code == 2, refused.output
    assert (
        f"a symbolic link to {tmp_path / 'gone' / 'site'}, which does not exist" in refused.output
    )


@pytest.mark.parametrize(
    "marker",
    [b"\xff\xfe\x00bad\n", b"a\x00b\n", b"../outside.txt\n{outside}\nsub\n"],
)
def test_an_export_over_a_damaged_marker_writes_and_removes_nothing_outside(
    results, tmp_path, marker
):
    """Before: bytes that are no UTF-8 in the folder's .numerate-export were a
    UnicodeDecodeError, a NUL a ValueError (tracebacks). Only names of files inside the folder
    are taken from it: a file outside it, or a folder inside it, is left alone."""
    db, _ = results
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    (out / ".numerate-export").write_bytes(marker.replace(b"{outside}", bytes(outside)))
    done = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert done.exit_code == 0, done.output
    assert (out / "index.html").is_file() and (out / "sub").is_dir()
    assert outside.read_text() == "mine"


def answers(db):
    """How many answers `db` holds (0 before it exists), read like any reader."""
    from numerate.kernel.errors import ConfigError
    from numerate.store.reader import Reader

    try:
        with Reader.open(str(db)) as reader:
            return reader.query("SELECT count(*) FROM responses")[0][0]
    except ConfigError:
        return 0


def test_the_shutdown_a_second_ctrl_c_cuts_short_is_not_shown():
    """Corpus I: Ctrl-C twice within 0.1 s printed the lifespan's CancelledError traceback,
    which uvicorn logs as text, under `interrupted`; another error is still shown."""
    import logging

    from numerate.cli.view import _no_cancelled_pages

    def record(message):
        return logging.LogRecord("uvicorn.error", logging.ERROR, "", 0, message, None, None)

    cut = "Traceback (most recent call last):\n  File ...\nasyncio.exceptions.CancelledError\n"
    assert not _no_cancelled_pages(record(cut))
    assert _no_cancelled_pages(record("Traceback (most recent call last):\nValueError: x"))


SLOW_EXPORT = """
import sys, time
import numerate.view.export as export
class Slowly(export.Confined):  # each page of the export written slowly
    def write(self, relative, content):
        super().write(relative, content)
        print("written", flush=True)
        time.sleep(0.3)
export.Confined = Slowly
from numerate.cli import main
sys.argv = ["numerate", "view", "--db", sys.argv[1], "--export", sys.argv[2]]
main()
"""


@pytest.mark.parametrize("earlier", [False, True])
def test_an_export_a_signal_stops_is_removed_or_kept_whole(results, tmp_path, earlier):
    """Corpus K: a new export stopped by Ctrl-C left half a site behind (its links leading
    nowhere), saying a bare `interrupted`. Now a new one is removed; one over an earlier
    export keeps what it had, its marker listing the pages written now as well."""
    import signal

    db, _ = results
    out = tmp_path / "out"
    if earlier:
        assert runner.invoke(app, ["view", "--db", str(db), "--export", str(out)]).exit_code == 0
        listed = set((out / ".numerate-export").read_text().splitlines())
    command = [sys.executable, "-c", SLOW_EXPORT, str(db), str(out)]
    stopped = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert stopped.stdout.readline().strip() == "written"
        assert stopped.stdout.readline().strip() == "written"
        stopped.send_signal(signal.SIGINT)
        _, err = stopped.communicate(timeout=30)
    finally:
        stopped.kill()
    assert stopped.returncode == 130, err
    if earlier:
        assert err.strip().endswith("is incomplete; run the same command again to finish it")
        assert set((out / ".numerate-export").read_text().splitlines()) >= listed
    else:
        assert err.strip().endswith(f"what it had written in {out} is removed"), err
        assert not out.exists()


def test_a_page_whose_query_a_stop_interrupted_stops_the_export(results, tmp_path, monkeypatch):
    """Corpus K: the page whose query Ctrl-C interrupted was exported as "could not show this
    page: Query interrupted", the export went on and exited 0: the signal was lost."""
    import numerate.view.export as exporting
    from numerate.kernel import stopping
    from numerate.store.reader import Reader
    from numerate.view.app import templates

    def interrupted(links):
        raise RuntimeError("Query interrupted")

    db, _ = results
    with Reader.open(str(db)) as reader:
        path, template, _ = next(exporting._pages(reader, None))
        monkeypatch.setattr(exporting, "_pages", lambda *_: iter([(path, template, interrupted)]))
        unshown = exporting.export(reader, tmp_path / "a", templates()).unshown
        assert unshown == (path,)  # no stop: the page says why
        stopping.ask()
        try:
            with pytest.raises(KeyboardInterrupt):
                exporting.export(reader, tmp_path / "b", templates())
        finally:
            stopping._asked.clear()


def test_an_export_stopped_before_its_first_page_leaves_no_folder(results, tmp_path, monkeypatch):
    """Corpus L: a signal in the export's first second (its folder made, no page yet) left
    the folder behind with an empty `.numerate-export` in it."""
    import numerate.cli.view as view

    def stopped(path, folder):
        raise KeyboardInterrupt

    monkeypatch.setattr(view, "export_pages", stopped)
    db, _ = results
    out = tmp_path / "new" / "out"
    result = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert result.exit_code == 130, result.output
    assert not (tmp_path / "new").exists()  # nor the folder made above it
    kept = tmp_path / "kept"  # a folder the user had, empty: kept as it was
    kept.mkdir()
    runner.invoke(app, ["view", "--db", str(db), "--export", str(kept)])
    assert kept.is_dir()


def test_no_value_of_an_address_comes_back_whole_or_with_a_control_character(client, results):
    """A hostile pass: a 100 KB search came back whole in the runs page's search box, a 100 KB
    run id or 20 KB model in a 404 page; `/run/%00` was a 404 and an image's
    `annotated=%00` a 200, where a control character is a 400 everywhere else."""
    _, (first, _) = results
    long = "k" * 20_000  # the test client takes addresses of at most 64 KB
    for address, params in (
        ("/", {"q": long}),
        (f"/run/{long}", {}),
        (f"/run/{first}/case", {"model": long, "id": "x"}),
        ("/compare", {"base": first, "new": long}),
        ("/run/%00", {}),
        (f"/numgen/{first}/image/x", {"annotated": "\x00"}),
        (f"/run/{first}/answer", {"model": "m", "id": "x", "k" * 9000: "1"}),
    ):
        answered = client.get(address, params=params)
        assert answered.status_code == 400, (address[:40], answered.text[:300])
        assert long not in answered.text and len(answered.text) < 20_000
    missing = client.get(f"/{long}")
    assert missing.status_code == 404 and len(missing.text) < 20_000


def test_a_run_named_as_the_commands_name_it_leads_to_its_page(client, results):
    """A hostile sweep: `/run/latest` and `compare?base=previous&new=latest` were 404 pages,
    while every command takes `latest`, `previous` and a unique prefix of an id."""
    _, (first, second) = results
    for asked, page in [
        ("/run/latest", f"/run/{second}"),
        ("/run/previous/manifold/objects", f"/run/{first}/manifold/objects"),
        (f"/run/{second[:-3]}/cases/objects?model=m", f"/run/{second}/cases/objects?model=m"),
        ("/compare?base=previous&new=latest", f"/compare?base={first}&new={second}"),
    ]:
        moved = client.get(asked, follow_redirects=False)
        assert (moved.status_code, unquote(moved.headers["location"])) == (307, page), asked
    assert client.get(f"/run/{second}", follow_redirects=False).status_code == 200
    assert client.get("/run/nosuch", follow_redirects=False).status_code == 404
    assert client.get("/run/latest").status_code == 200  # followed
    # a first-contact review: a prefix of both runs' ids was "no run", as if they were gone
    shared = first[: next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)]
    for asked in (f"/run/{shared}", f"/compare?base={shared}&new=latest"):
        both = client.get(asked, follow_redirects=False)
        said = html.unescape(both.text)
        assert both.status_code == 404 and f"run {shared!r} is ambiguous: it starts" in said
