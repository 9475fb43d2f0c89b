"""Issue 40: files planted in an images folder or an export folder lead nowhere outside it.
The viewer serves no file through a link, an export copies none, and writing or removing an
export's files never goes through a link planted in it (numerate.kernel.confined)."""

from __future__ import annotations

import html
import os
from pathlib import Path

import duckdb
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from numerate.cli import app
from numerate.view.app import create_app

runner = CliRunner()
SECRET = "root:x:0:0:the content of a file outside every folder of numerate's\n"


@pytest.fixture
def numgen_run(tmp_path):
    """A NumGen run of its own (its images in tmp_path/imgs), a file outside its folders, and
    one of its images (prompt id, path)."""
    db = tmp_path / "x.duckdb"
    made = runner.invoke(app, ["numgen", "run", "--generator", "synthetic", "--detector",
                               "blobs", "--count", "1", "--db", str(db), "--images-dir",
                               str(tmp_path / "imgs")])  # fmt: skip
    assert made.exit_code == 0, made.output
    (secret := tmp_path / "outside" / "passwd").parent.mkdir()
    secret.write_text(SECRET)
    con = duckdb.connect(str(db), read_only=True)
    [(run_id, prompt_id, path)] = con.sql(
        "SELECT run_id, prompt_id, path FROM numgen_images ORDER BY prompt_index LIMIT 1"
    ).fetchall()
    con.close()
    return db, run_id, prompt_id, Path(path), secret


def test_an_image_replaced_by_a_link_is_not_served(numgen_run):
    """F3: `ln -s /etc/passwd <id>.png` in the run's images folder: the image route answered
    200, image/png, with /etc/passwd."""
    db, run_id, prompt_id, image, secret = numgen_run
    client = TestClient(create_app(str(db)))
    address = f"/numgen/{run_id}/image/{prompt_id}"
    served = client.get(address)
    assert served.status_code == 200 and served.content.startswith(b"\x89PNG")
    image.unlink()
    os.symlink(secret, image)
    refused = client.get(address)
    assert refused.status_code == 403, refused.text
    assert SECRET not in refused.text and "a symbolic link" in refused.text
    os.rename(image.parent / "annotated", image.parent / "aside")
    os.symlink(secret.parent, image.parent / "annotated")  # a folder on the way, too
    annotated = client.get(address + "?annotated=1")
    assert annotated.status_code in (403, 404) and SECRET not in annotated.text


@pytest.mark.parametrize("levels", [1, 2], ids=["generator folder", "images folder"])
def test_a_folder_of_images_replaced_by_a_link_is_not_served_nor_copied(
    numgen_run, tmp_path, levels
):
    """A hostile pass: the run's images folder was the one its images share (`images/<generator>`),
    reached through links as a user's own folder is, so a link in place of it (to a folder
    of images elsewhere) was served, 200, and copied by an export. A second pass: then the
    same at `<images_dir>/images`. The folder reached through links is now `<images_dir>`,
    the user's; `images` and the generator's folder in it are numerate's."""
    import shutil

    db, run_id, prompt_id, image, _ = numgen_run
    generator = image.parents[levels - 1]
    assert generator.name == ("images" if levels == 2 else image.parent.name)
    elsewhere = tmp_path / "elsewhere-images"
    shutil.copytree(generator, elsewhere)
    os.rename(generator, generator.with_name("aside"))
    os.symlink(elsewhere, generator)
    served = TestClient(create_app(str(db))).get(f"/numgen/{run_id}/image/{prompt_id}")
    assert served.status_code == 403 and "a symbolic link" in served.text
    out = tmp_path / "export"
    done = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert done.exit_code == 0, done.output
    assert "a symbolic link" in done.stderr
    assert not list(out.glob("numgen/*/images/*.png"))


def test_an_image_path_the_database_was_made_to_hold_elsewhere_is_not_served(numgen_run, tmp_path):
    """An image's recorded path changed by hand to a picture elsewhere was served (the folder
    served was the one every recorded path shared, so the edit widened it)."""
    import shutil

    db, run_id, prompt_id, image, _ = numgen_run
    elsewhere = tmp_path / "private" / "photo.png"
    elsewhere.parent.mkdir()
    shutil.copy(image, elsewhere)
    con = duckdb.connect(str(db))
    con.execute(
        "UPDATE numgen_images SET path = ? WHERE prompt_id = ?", [str(elsewhere), prompt_id]
    )
    con.close()
    client = TestClient(create_app(str(db)))
    assert client.get(f"/numgen/{run_id}/image/{prompt_id}").status_code == 404
    others = (
        duckdb.connect(str(db), read_only=True)
        .sql("SELECT prompt_id FROM numgen_images WHERE prompt_id <> ? LIMIT 1", params=[prompt_id])
        .fetchall()
    )
    assert client.get(f"/numgen/{run_id}/image/{others[0][0]}").status_code == 200


def test_an_export_copies_no_image_that_is_a_link(numgen_run, tmp_path):
    """F8: `view --export` copied the link's target into the export."""
    db, _, _, image, secret = numgen_run
    image.unlink()
    os.symlink(secret, image)
    out = tmp_path / "export"
    done = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert done.exit_code == 0, done.output
    assert f"warning: image not copied: {image}: a symbolic link" in done.stderr
    assert not any(SECRET in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert len(list(out.glob("numgen/*/images/*.png"))) == 9  # the 9 others


def another_image(db: Path, run_id: str, prompt_id: str) -> bytes:
    """The content of another image of the run, asked for another number of objects."""
    con = duckdb.connect(str(db), read_only=True)
    [(other,)] = con.execute(
        "SELECT path FROM numgen_images WHERE run_id = ? AND target <> (SELECT target FROM "
        "numgen_images WHERE run_id = ? AND prompt_id = ?) LIMIT 1", [run_id, run_id, prompt_id]
    ).fetchall()  # fmt: skip
    con.close()
    return Path(other).read_bytes()


def test_an_image_another_was_copied_over_is_neither_shown_served_nor_exported(
    numgen_run, tmp_path
):
    """A hostile sweep: an image file overwritten with another image's bytes was served, shown
    on its cell's page and exported as the image the detector counted, though the run records
    its SHA-256 (which a recount already checks)."""
    db, run_id, prompt_id, image, _ = numgen_run
    con = duckdb.connect(str(db), read_only=True)
    [(target, count)] = con.execute(
        "SELECT i.target, d.count FROM numgen_images i JOIN numgen_detections d "
        "USING (run_id, prompt_id) WHERE prompt_id = ?", [prompt_id]
    ).fetchall()  # fmt: skip
    con.close()
    client = TestClient(create_app(str(db)))
    address = f"/numgen/{run_id}/image/{prompt_id}"
    cell = f"/numgen/{run_id}/cell?target={target}&count={count}"
    assert client.get(address).status_code == 200
    before = client.get(cell).text
    assert "image not shown" not in before and f'href="{address}"' in before
    image.write_bytes(another_image(db, run_id, prompt_id))  # a PNG still, of another image
    name = image.relative_to(image.parents[2]).as_posix()  # images/<generator>/<id>.png
    refused = client.get(address)
    assert refused.status_code == 409, refused.text
    assert refused.text.startswith(f"not served: {name}: not the image the run made (its SHA-256")
    shown = client.get(cell)
    assert shown.status_code == 200
    assert f"image not shown: {name}: not the image the run made" in html.unescape(shown.text)
    assert f'href="{address}"' not in shown.text  # no link to it
    out = tmp_path / "export"
    done = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert done.exit_code == 0, done.output
    assert f"warning: image not copied: {name}: not the image the run made" in done.stderr
    assert len(list(out.glob("numgen/*/images/*.png"))) == 9  # the 9 others
    image.write_bytes(b"GIF89a" + bytes(100))  # no PNG at all: said so, not linked
    shown = html.unescape(client.get(cell).text)
    assert f"image not shown: {name}: no PNG image (replaced since it was made?)" in shown


def test_an_image_counted_apart_that_was_replaced_is_not_shown_on_the_agreement(numgen_run):
    """The agreement of a recount lists the images its counters counted most apart, each
    shown: one copied over since is named, not shown as the image both counted."""
    db, run_id, prompt_id, image, _ = numgen_run
    again = runner.invoke(app, ["numgen", "recount", run_id, "--detector", "blobs",
                                "--db", str(db)])  # fmt: skip
    assert again.exit_code == 0, again.output
    con = duckdb.connect(str(db))
    [(recount,)] = con.execute(
        "SELECT run_id FROM numgen_runs WHERE source_run_id = ?", [run_id]
    ).fetchall()
    con.execute(  # the second counter saw one more object in that image
        "UPDATE numgen_detections SET count = count + 1 WHERE run_id = ? AND prompt_id = ?",
        [recount, prompt_id],
    )
    con.close()
    client = TestClient(create_app(str(db)))
    link = f'<img class="thumb" src="/numgen/{recount}/image/{prompt_id}"'
    assert link in client.get(f"/numgen/{recount}").text
    image.write_bytes(another_image(db, run_id, prompt_id))
    page = client.get(f"/numgen/{recount}")
    assert page.status_code == 200 and link not in page.text
    assert f"<tr><td>{prompt_id}</td>" in page.text  # named, not shown


@pytest.fixture
def exported(numgen_run, tmp_path):
    """The run's database and an export of it, and a folder outside holding a user's file."""
    db = numgen_run[0]
    out = tmp_path / "e2"
    assert runner.invoke(app, ["view", "--db", str(db), "--export", str(out)]).exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("a user's file")
    return db, out, elsewhere, numgen_run[-1]


def outside(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_a_reexport_replaces_a_page_planted_as_a_link_and_never_writes_through_it(exported):
    """F6: with e2/index.html a link to an outside file, the next export overwrote that file
    (exit 0); the same through a marker linked to an outside file."""
    db, out, _elsewhere, secret = exported
    for name in ("index.html", ".numerate-export"):
        (out / name).unlink()
        os.symlink(secret, out / name)
        again = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
        assert again.exit_code == 0, again.output
        assert secret.read_text() == SECRET  # never written through
        assert (out / name).is_file() and not (out / name).is_symlink()
    assert "index.html" in (out / ".numerate-export").read_text()


def test_a_reexport_writes_nothing_into_a_folder_planted_as_a_link(exported):
    """F6: with e2/numgen/RUN a link to an outside folder, the next export wrote its pages
    into that folder (exit 0). It says the link is there and writes nothing through it."""
    db, out, elsewhere, _ = exported
    [run_folder] = [p for p in (out / "numgen").iterdir() if p.is_dir()]
    before = outside(elsewhere)
    os.rename(run_folder, out / "kept-aside")
    os.symlink(elsewhere, run_folder)
    again = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert again.exit_code == 2, again.output
    assert again.stderr.startswith(f"error: {run_folder}: a symbolic link; numerate follows no")
    assert outside(elsewhere) == before


def test_a_reexport_removes_nothing_through_a_folder_planted_as_a_link(exported, tmp_path):
    """F7: with e6/numgen/RUN a link to an outside folder holding copies of the run's pages
    and a user's file, exporting a database without that run removed the copies there."""
    _, out, elsewhere, _ = exported
    [run_folder] = [p for p in (out / "numgen").iterdir() if p.is_dir()]
    for page in run_folder.glob("*.html"):
        (elsewhere / page.name).write_text(page.read_text())
    before = outside(elsewhere)
    os.rename(run_folder, out / "kept-aside")
    os.symlink(elsewhere, run_folder)
    empty = tmp_path / "other.duckdb"  # a database of sweeps only: the NumGen run is gone
    made = runner.invoke(app, ["run", "--model", "baseline:oracle", "--db", str(empty)])
    assert made.exit_code == 0, made.output
    again = runner.invoke(app, ["view", "--db", str(empty), "--export", str(out)])
    assert again.exit_code == 2, again.output
    assert outside(elsewhere) == before
    assert again.stderr.startswith(f"error: {run_folder}: a symbolic link; numerate follows no")


def test_a_reexport_into_a_folder_with_a_linked_folder_writes_nothing(exported):
    """A hostile pass: with e2/index.html a link and e2/numgen a link to a folder, the export
    replaced index.html, then refused the linked folder: half an export. It now refuses
    before it writes anything."""
    db, out, elsewhere, secret = exported
    (out / "index.html").unlink()
    os.symlink(secret, out / "index.html")
    os.rename(out / "numgen", out / "kept-aside")
    os.symlink(elsewhere, out / "numgen")
    again = runner.invoke(app, ["view", "--db", str(db), "--export", str(out)])
    assert again.exit_code == 2, again.output
    assert (
        again.stderr
        == f"error: {out / 'numgen'}: a symbolic link; numerate follows no link out of {out}\n"
    )
    assert (out / "index.html").is_symlink() and secret.read_text() == SECRET


def test_a_failed_export_into_a_new_folder_leaves_no_folder(exported, tmp_path, monkeypatch):
    """A failed export (exit 2) left its new folder behind with an empty marker."""
    import numerate.view.export

    def fails(*args, **kwargs):
        raise numerate.view.export.NumerateError("the database went away")

    monkeypatch.setattr(numerate.view.export, "export", fails)
    out = tmp_path / "new" / "export"
    done = runner.invoke(app, ["view", "--db", str(exported[0]), "--export", str(out)])
    assert (done.exit_code, done.stderr) == (2, "error: the database went away\n")
    assert not (tmp_path / "new").exists()


def test_a_run_s_pages_for_its_summary_are_not_written_through_a_planted_link(tmp_path):
    """A sweep's `view_dir` (a shared folder, as /shared/numerate-pages) whose RUN_ID folder
    someone replaced by a link to a folder elsewhere: the run's pages went into that folder.
    A second hostile pass: then the run wrote none, and said nothing of it."""
    from numerate.kernel.confined import LeadsOutside
    from numerate.kernel.progress import reporting_to
    from numerate.store import Store
    from numerate.tasks.artifacts import _export_view
    from numerate.view.export import export_run
    from tests.notes import Notes

    db = tmp_path / "runs.duckdb"
    made = runner.invoke(app, ["run", "--model", "baseline:oracle", "--db", str(db)])
    assert made.exit_code == 0, made.output
    store = Store.open(str(db))
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    with store.session():
        [(run_id,)] = store.con.sql("SELECT run_id FROM runs").fetchall()
        page = export_run(store, run_id, shared)
    run_folder = shared / run_id
    assert page.is_file() and page.is_relative_to(run_folder)
    os.rename(run_folder, tmp_path / "aside")
    elsewhere.mkdir()
    os.symlink(elsewhere, run_folder)
    with store.session(), pytest.raises(LeadsOutside, match="a symbolic link"):
        export_run(store, run_id, shared)
    assert list(elsewhere.iterdir()) == []
    with store.session(), reporting_to(Notes()) as heard:
        assert _export_view(store, run_id, str(shared)) is None  # what the run's end calls
    [note] = heard.notes
    assert note.startswith(f"run {run_id}: its pages were not written under {shared}: ")
    assert "a symbolic link" in note
    assert list(elsewhere.iterdir()) == []


def test_a_database_fault_is_a_500_page_that_says_so(numgen_run):
    """F5: a view of the database reading a file outside it, which DuckDB refuses to the
    viewer, answered 400 (a bad request): it is the database's fault."""
    db, _, _, _, secret = numgen_run
    con = duckdb.connect(str(db))
    con.sql("ALTER TABLE numgen_runs RENAME TO numgen_runs_kept")
    con.sql(f"CREATE VIEW numgen_runs AS SELECT * FROM read_text('{secret}')")
    con.close()
    client = TestClient(create_app(str(db)))
    shown = client.get("/numgen")
    assert shown.status_code == 500, shown.text
    assert "the results database could not answer this page" in shown.text
    assert SECRET not in shown.text
    assert client.get("/").status_code == 200  # the pages that do not read it are unharmed


@pytest.mark.parametrize("replaced", ["cut short", "garbage", "gone", "a folder"])
def test_a_database_that_cannot_be_opened_any_more_is_the_database_s_fault(numgen_run, replaced):
    """Before: a results database cut short, overwritten, removed or replaced by a folder while
    the viewer served it answered every page and file with 400 (a bad request), as Reader.open
    says it to a command (exit 2). It is the database's fault: a page's 500, a file's 503,
    each saying why in a line."""
    db, run_id, _, _, _ = numgen_run
    client = TestClient(create_app(str(db)))
    assert client.get("/").status_code == 200
    if replaced == "cut short":
        os.truncate(db, db.stat().st_size // 2)
    elif replaced == "garbage":
        db.write_bytes(os.urandom(db.stat().st_size))
    else:
        db.unlink()
        if replaced == "a folder":
            db.mkdir()
    page = client.get("/")
    assert page.status_code == 500, page.text
    assert "the results database could not answer this page" in page.text
    answer = client.get(f"/run/{run_id}/answer", params={"case": "x", "model": "m"})
    assert answer.status_code == 503 and answer.text.startswith("cannot show this answer: ")
    assert "\n" not in answer.text


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8000", "localhost"),
        ("127.0.0.1:", "127.0.0.1"),
        ("[::1]:8000", "[::1]"),
        ("localhost:80@evil.com", None),  # F4: split on the last colon, it was "localhost"
        ("[::1]evil.com", None),  # was "[::1]"
        ("localhost/x", None),
        ("local host", None),
        ("localhost:8o", None),
        ("", ""),
    ],
)
def test_a_host_header_is_read_by_the_standard_s_grammar(header, name):
    from numerate.view.app import host_name

    assert host_name(header) == name


def test_a_viewer_on_the_loopback_refuses_a_host_that_only_begins_like_its_own(tmp_path):
    """F4: `Host: localhost:80@evil.com` was accepted; two Host headers are refused too."""
    import asyncio

    from numerate.cli.view import LOOPBACK_NAMES

    db = tmp_path / "runs.duckdb"
    assert runner.invoke(app, ["run", "--model", "baseline:oracle", "--db", str(db)]).exit_code == 0
    viewer = create_app(str(db), LOOPBACK_NAMES)
    client = TestClient(viewer, base_url="http://localhost:8000")
    assert client.get("/").status_code == 200
    for host in ("localhost:80@evil.com", "[::1]evil.com", "evil.com:8000"):
        assert client.get("/", headers={"Host": host}).status_code == 400, host

    said: list[dict] = []

    async def twice() -> None:  # httpx sends one Host header: the ASGI call as a server makes it
        scope = {"type": "http", "method": "GET", "path": "/", "raw_path": b"/",
                 "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
                 "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 1),
                 "headers": [(b"host", b"localhost"), (b"host", b"evil.com")]}  # fmt: skip

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            said.append(message)

        await viewer(scope, receive, send)

    asyncio.run(twice())
    assert said[0]["status"] == 400


def test_a_folder_whose_page_merely_mentions_numerate_view_is_not_an_export(numgen_run, tmp_path):
    """The second hostile pass: an index.html of the user's that mentions "numerate view" was
    taken for an export made before exports left their marker, and written over (exit 0). An
    old export's runs page, with the viewer's title, still is one."""
    db = numgen_run[0]
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "index.html").write_text("<p>my notes about numerate view</p>")
    refused = runner.invoke(app, ["view", "--db", str(db), "--export", str(mine)])
    assert refused.exit_code == 2 and "a folder with other files in it" in refused.stderr
    assert (mine / "index.html").read_text() == "<p>my notes about numerate view</p>"
    old = tmp_path / "old"
    assert runner.invoke(app, ["view", "--db", str(db), "--export", str(old)]).exit_code == 0
    (old / ".numerate-export").unlink()  # as an export made before there was a marker
    again = runner.invoke(app, ["view", "--db", str(db), "--export", str(old)])
    assert again.exit_code == 0, again.output
