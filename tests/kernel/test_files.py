"""kernel.files.write_atomically: the one way numerate writes output files."""

import errno
import os
from pathlib import Path

import pytest

from numerate.kernel import files
from numerate.kernel.files import OutputPathError, write_atomically


def test_writes_text_bytes_and_a_writer_and_leaves_no_temporary_file(tmp_path):
    write_atomically(tmp_path / "a.txt", "é\n")
    write_atomically(tmp_path / "b.bin", b"\x00\x01")
    write_atomically(tmp_path / "sub" / "c.bin", lambda handle: handle.write(b"w"))
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "é\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "sub" / "c.bin").read_bytes() == b"w"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "sub"]


def test_a_link_planted_at_a_temporary_name_is_never_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "out.txt.partial").symlink_to(victim)
    (tmp_path / ".out.txt.partial").symlink_to(victim)
    write_atomically(tmp_path / "out.txt", "new")
    assert victim.read_text() == "keep"
    assert (tmp_path / "out.txt").read_text() == "new"


def test_an_output_path_that_is_a_link_writes_the_link_s_target(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "target.txt").write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "real" / "target.txt")
    write_atomically(link, "new")
    assert link.is_symlink() and (tmp_path / "real" / "target.txt").read_text() == "new"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to("made.txt")
    write_atomically(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "made.txt").read_text() == "made"
    far = tmp_path / "far.txt"  # before: its folders were made, wherever the link points
    far.symlink_to(tmp_path / "nonexist" / "deeper" / "x.txt")
    with pytest.raises(OutputPathError, match=r"far\.txt: a symbolic link to .*whose folder"):
        write_atomically(far, "made")
    assert not (tmp_path / "nonexist").exists()
    write_atomically(tmp_path / "sub" / "dir" / "y.txt", "made")  # a path as written: made
    assert (tmp_path / "sub" / "dir" / "y.txt").read_text() == "made"


@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs /proc")
def test_a_folder_no_file_can_be_made_in_says_so():
    """Before: "No such file or directory" for /proc/version, which exists."""
    with pytest.raises(OutputPathError, match="/proc/version: no file can be made in /proc"):
        write_atomically(Path("/proc/version"), "x")


@pytest.mark.parametrize("failure", ["full disk", "error while writing", "interrupted"])
def test_a_failure_mid_write_leaves_the_old_file_and_nothing_else(tmp_path, failure):
    target = tmp_path / "out.png"
    target.write_bytes(b"old")

    def write(handle):
        handle.write(b"x" * 100_000)
        if failure == "full disk":
            raise OSError(errno.ENOSPC, "No space left on device")
        if failure == "interrupted":
            raise KeyboardInterrupt
        raise ValueError("rendering failed")

    with pytest.raises((OSError, ValueError, KeyboardInterrupt)):
        write_atomically(target, write)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.png"]


def test_a_full_disk_at_fsync_leaves_nothing(tmp_path, monkeypatch):
    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(tmp_path / "new.jsonl", "x" * 1000)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "not a file name"),
        (".", "a folder"),  # the folder itself
        ("folder", "a folder"),
        ("folder/..", "not a file name"),
        ("fifo", "not a regular file"),  # never a device: an older numerate replaced /dev/null
        ("loop", "leads nowhere"),
        ("file.txt/x", "is a file, not a folder"),
        ("file.txt/a/b/x", "is a file, not a folder"),
    ],
)
def test_a_path_that_cannot_be_a_file_is_refused_and_nothing_is_made(tmp_path, name, reason):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "loop").symlink_to("loop")
    os.mkfifo(tmp_path / "fifo")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(OutputPathError, match=reason):
        write_atomically(tmp_path / name if name else type(tmp_path)(name), "content")
    assert sorted(tmp_path.rglob("*")) == before
    assert (tmp_path / "file.txt").read_text() == "x"


def test_an_open_file_of_a_process_is_refused_and_the_file_behind_it_kept(tmp_path):
    """A hostile pass: `generate --out /dev/stdout >> log.txt` wrote a new file and renamed
    it over log.txt (what the link resolves to), its earlier lines lost; `--out /dev/stdin`
    replaced the file fed in. Standard output, a descriptor or a link to one is refused."""
    log = tmp_path / "log.txt"
    log.write_text("earlier lines\n")
    (tmp_path / "mine").symlink_to("/dev/stdout")
    with log.open("a") as held:
        names = [f"/dev/fd/{held.fileno()}", f"/proc/self/fd/{held.fileno()}"]
        os.symlink(names[1], tmp_path / "fd")
        for name in [*names, str(tmp_path / "fd"), str(tmp_path / "mine"), "/dev/stdout"]:
            with pytest.raises(OutputPathError, match="an open file of a process"):
                write_atomically(Path(name), "content")
    assert log.read_text() == "earlier lines\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fd", "log.txt", "mine"]


def test_an_existing_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "private.txt"
    target.write_text("old")
    target.chmod(0o600)
    write_atomically(target, "new")
    assert target.stat().st_mode & 0o777 == 0o600
    fresh = write_atomically(tmp_path / "fresh.txt", "new")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_duckdb_database_is_never_overwritten_by_an_output(tmp_path):
    """Before: `generate --out results.duckdb` replaced a results database with JSON Lines."""
    import duckdb

    db = tmp_path / "results.duckdb"
    duckdb.connect(str(db)).close()
    before = db.read_bytes()
    with pytest.raises(OutputPathError, match="a DuckDB database"):
        write_atomically(db, "{}\n")
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    "owned", ["results.duckdb.wal", "results.duckdb.journal/h-1-t.000001.jsonl"]
)
def test_a_database_s_log_and_journal_are_never_overwritten_by_an_output(tmp_path, owned):
    """A hostile pass: `generate --out results.duckdb.wal` wrote over DuckDB's write-ahead log,
    which after a crash holds committed rows (as numerate's journal holds answers not yet in
    the database); a file so named beside no database is anyone's."""
    import duckdb

    db = tmp_path / "results.duckdb"
    duckdb.connect(str(db)).close()
    target = tmp_path / owned
    target.parent.mkdir(exist_ok=True)
    target.write_text("kept")
    with pytest.raises(OutputPathError, match=f"a file of the DuckDB database {db} "):
        write_atomically(target, "{}\n")
    assert target.read_text() == "kept"
    db.unlink()  # no database: the name is anyone's
    write_atomically(target, "{}\n")
    assert target.read_text() == "{}\n"


def test_a_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    """Before: `view_dir: /proc/x` was taken; after the run its pages were silently not
    written (exit 0)."""
    from numerate.kernel.errors import ConfigError

    made = tmp_path / "pages" / "deeper"
    files.check_writable_folder("view_dir", made)
    assert not (tmp_path / "pages").exists()  # made for the check, then removed: the work
    there = tmp_path / "there"  # makes them (an images_dir's were left by a failed command)
    there.mkdir()
    files.check_writable_folder("view_dir", there)
    assert there.is_dir() and not any(there.iterdir())  # kept, and the probe removed
    if Path("/proc/version").exists():
        with pytest.raises(ConfigError, match=r"view_dir '/proc/x' cannot be written"):
            files.check_writable_folder("view_dir", "/proc/x")


def test_a_file_one_byte_over_the_limit_is_refused(tmp_path):
    from numerate.kernel.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text("x" * 10)
    assert files.read_text(path, "config", limit=10) == "x" * 10
    path.write_text("x" * 11)
    with pytest.raises(ConfigError, match="larger than 10 bytes"):
        files.read_text(path, "config", limit=10)


def test_a_file_read_a_line_at_a_time_is_the_file_read_whole(tmp_path):
    """`grade` and `numgen score` read their files a line at a time (they held 512 MiB whole):
    the same lines, a line ending at a line feed only, a byte order mark dropped, the same
    bounds and errors, the bad line named."""
    from numerate.kernel.errors import ConfigError

    path = tmp_path / "a.jsonl"
    text = '\ufeff{"a": "x\u2028y\u0085"}\r\n\n{"b": "\ufeff"}'
    path.write_text(text, encoding="utf-8")
    read = list(files.text_lines(path, 1_000))
    assert read == ['{"a": "x\u2028y\u0085"}\r\n', "\n", '{"b": "\ufeff"}']
    assert "".join(read) == files.read_text(path, limit=1_000)
    size = len(text.encode())
    assert len(list(files.text_lines(path, size))) == 3
    with pytest.raises(ConfigError, match=f"a.jsonl is larger than {size - 1:,} bytes"):
        list(files.text_lines(path, size - 1))
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(ConfigError, match=r"a.jsonl is not UTF-8 text \(line 2\)"):
        list(files.text_lines(path, 1_000))
    with pytest.raises(ConfigError, match="cannot read"):
        list(files.text_lines(tmp_path / "missing.jsonl", 1_000))
    endless = files.text_lines(Path("/dev/zero"), 4096)  # no line feed ever: bounded all the same
    with pytest.raises(ConfigError, match="larger than 4,096 bytes"):
        list(endless)


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "../x", "a/.."])
def test_a_slug_is_never_a_path_nor_a_hidden_name(name):
    """A mutation sweep: without the leading-dot rule, `slug("..")` was `..` (a run id `..`
    made a page path that leaves its folder) and every test passed."""
    made = files.slug(name)
    assert not made.startswith(".") and "/" not in made and made not in ("", ".", "..")
    assert files.slug("run-1_a.b") == "run-1_a.b"  # a plain name stays itself


def test_a_home_folder_of_no_user_is_refused_naming_the_setting():
    """A hostile pass: `PREFECT_HOME='~nouser/x'` (or images_dir, or a database's folder) was
    Path.expanduser's RuntimeError, a traceback of 45-59 lines."""
    from numerate.kernel.errors import ConfigError
    from numerate.kernel.files import check_folder

    with pytest.raises(ConfigError) as refused:
        check_folder("PREFECT_HOME", "~no-such-user-of-numerate/x")
    assert str(refused.value) == (
        "PREFECT_HOME '~no-such-user-of-numerate/x': ~no-such-user-of-numerate: no user of "
        "this machine has that name"
    )


def test_reading_a_pipe_nobody_writes_yet_says_what_it_waits_for_then_reads_it(
    tmp_path, monkeypatch
):
    """A hostile sweep: `run --config` on a named pipe with no writer waited with nothing on
    the screen. The wait is said once it passes WAIT_SAID_AFTER_S; the text written then is
    read whole. A regular file says nothing."""
    import io
    import threading

    pipe = tmp_path / "config.yaml"
    os.mkfifo(pipe)
    said = threading.Event()

    class Heard(io.StringIO):
        def write(self, text: str) -> int:
            said.set()
            return super().write(text)

    heard = Heard()
    monkeypatch.setattr(files.sys, "stderr", heard)
    monkeypatch.setattr(files, "WAIT_SAID_AFTER_S", 0.05)

    def writer() -> None:
        said.wait(timeout=10)  # only once the wait was said
        pipe.write_text("name: x\n")

    threading.Thread(target=writer, daemon=True).start()
    assert files.read_text(pipe, "sweep config", limit=1_000) == "name: x\n"
    assert heard.getvalue() == (
        f"waiting for sweep config {pipe} to be written (not a regular file: a pipe is read as "
        "its writer writes it; Ctrl-C stops)\n"
    )
    regular = tmp_path / "regular.yaml"
    regular.write_text("name: y\n")
    assert files.waits_for_a_writer(pipe) and not files.waits_for_a_writer(regular)
    assert not files.waits_for_a_writer(tmp_path / "missing.yaml")
