"""kernel.confined: no file outside a folder is read, written or removed through a link
planted in it."""

import os

import pytest

from numerate.kernel.confined import Confined, LeadsOutside


@pytest.fixture
def planted(tmp_path):
    """A folder holding a file, a link to a file outside, a link to a folder outside."""
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    (inside / "runs" / "r1").mkdir(parents=True)
    outside.mkdir()
    (inside / "runs" / "r1" / "page.html").write_text("ours")
    (outside / "secret.txt").write_text("theirs")
    (outside / "page.html").write_text("theirs too")
    os.symlink(outside / "secret.txt", inside / "index.html")
    os.symlink(outside, inside / "runs" / "r2")
    return Confined(inside), outside


def test_a_file_inside_is_read_and_a_link_is_refused(planted):
    folder, _ = planted
    assert folder.read_bytes("runs/r1/page.html", 100) == b"ours"
    with pytest.raises(LeadsOutside, match=r"index\.html: a symbolic link; numerate follows no"):
        folder.read_bytes("index.html", 100)
    with pytest.raises(LeadsOutside, match="runs/r2: a symbolic link"):
        folder.read_bytes("runs/r2/page.html", 100)
    with pytest.raises(ValueError, match="larger than 2 bytes"):
        folder.read_bytes("runs/r1/page.html", 2)
    assert folder.is_file("runs/r1/page.html")
    assert not folder.is_file("index.html") and not folder.is_file("runs/r2/page.html")


def test_a_write_replaces_a_link_at_its_name_and_never_writes_through_a_linked_folder(planted):
    folder, outside = planted
    folder.write("index.html", b"new page")
    assert not (folder.folder / "index.html").is_symlink()
    assert (folder.folder / "index.html").read_bytes() == b"new page"
    assert (outside / "secret.txt").read_text() == "theirs"
    with pytest.raises(LeadsOutside, match="runs/r2: a symbolic link"):
        folder.write("runs/r2/page.html", b"new page")
    assert (outside / "page.html").read_text() == "theirs too"
    assert sorted(p.name for p in outside.iterdir()) == ["page.html", "secret.txt"]
    folder.write("runs/r3/cases/a.html", b"made")  # its folders made
    assert (folder.folder / "runs" / "r3" / "cases" / "a.html").read_bytes() == b"made"


def test_a_removal_never_reaches_through_a_linked_folder(planted):
    folder, outside = planted
    with pytest.raises(LeadsOutside):
        folder.remove("runs/r2/page.html")
    assert (outside / "page.html").exists()
    folder.remove("index.html")  # the link itself
    assert not os.path.lexists(folder.folder / "index.html")
    assert (outside / "secret.txt").exists()
    folder.remove("runs/r1/page.html")  # and the folders it empties, up to the folder
    assert not (folder.folder / "runs" / "r1").exists()
    assert (folder.folder / "runs").is_dir()  # r2, the link, is still in it
    folder.remove("runs/r1/page.html")  # gone: nothing to do


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../outside/secret.txt", "a/../../b", "a\x00"])
def test_a_name_that_leaves_the_folder_is_refused(planted, name):
    folder, _ = planted
    with pytest.raises(LeadsOutside, match="not a name inside the folder"):
        folder.read_bytes(name, 100)


def test_a_recorded_path_is_placed_under_the_folder_by_name(tmp_path):
    folder = Confined(tmp_path / "images")
    assert folder.relative(tmp_path / "images" / "a" / "b.png") == "a/b.png"
    assert folder.relative(tmp_path / "images" / ".." / "x.png") is None
    assert folder.relative(tmp_path / "elsewhere.png") is None
    assert folder.relative(tmp_path / "images") is None


def test_a_pipe_under_the_folder_is_refused_not_opened(tmp_path):
    """A mutation sweep: refusing only a folder there (not every file but a regular one)
    passed every test; a pipe opened for reading waits for a writer forever."""
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(LeadsOutside, match="not a regular file"):
        Confined(tmp_path).open("pipe")


def test_a_link_at_the_first_level_numerate_makes_is_never_written_through(tmp_path):
    """`<images_dir>/images/<generator>/<file>`: a link planted at `images` is refused (a
    mutation sweep: confining one level less passed every test), while the user's folder
    itself may be a link."""
    from numerate.kernel.confined import confined_path, write_below

    root, elsewhere = tmp_path / "images-dir", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "images").symlink_to(elsewhere, target_is_directory=True)
    target = root / "images" / "synthetic" / "a.png"
    folder, name = confined_path(target, 3)
    assert (folder.folder, name) == (Confined(root).folder, "images/synthetic/a.png")
    with pytest.raises(LeadsOutside):
        write_below(target, 3, b"image")
    assert list(elsewhere.iterdir()) == []
    (tmp_path / "link-to-root").symlink_to(root, target_is_directory=True)
    (root / "images").unlink()
    write_below(tmp_path / "link-to-root" / "images" / "synthetic" / "a.png", 3, b"image")
    assert (root / "images" / "synthetic" / "a.png").read_bytes() == b"image"
