import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from numerate.numgen.synthetic import SHAPES, count_blobs, draw_stimulus
from tests.examples import examples


@examples(120)
@given(
    n=st.integers(0, 25),
    seed=st.integers(0, 2**32 - 1),
    shape=st.sampled_from([None, *SHAPES]),
    size=st.sampled_from([64, 128, 256]),
)
def test_the_counter_finds_exactly_the_shapes_drawn(n, seed, shape, size):
    assert count_blobs(draw_stimulus(n, seed, size, shape)).count == n


def test_the_same_seed_draws_the_same_image():
    a, b = draw_stimulus(7, 11), draw_stimulus(7, 11)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != draw_stimulus(7, 12).tobytes()


def test_specks_are_not_counted_and_touching_shapes_are_one():
    image = Image.new("RGB", (200, 200), "white")
    draw = ImageDraw.Draw(image)
    draw.point((5, 5), fill="black")  # a compression speck
    draw.ellipse((20, 20, 60, 60), fill="black")
    draw.ellipse((58, 20, 98, 60), fill="black")  # touches the first
    draw.rectangle((120, 120, 160, 160), fill="black")
    blobs = count_blobs(image)
    assert blobs.count == 2
    assert blobs.boxes[-1] == (120.0, 120.0, 161.0, 161.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [((41, 0), "n must be in 0..40"), ((3, 0, 32), "size must be at least 64"),
     ((3, 0, 128, "hexagon"), "shape must be one of")],
)  # fmt: skip
def test_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        draw_stimulus(*args)


@pytest.mark.parametrize("planted", ["images", "runs"])
def test_no_file_of_a_run_is_written_through_a_link_in_its_images_folder(
    tmp_path, planted, monkeypatch
):
    """A hostile pass: a link at `<images_dir>/images` (or `runs`) had the run's images, their
    annotated copies, its manifests and its heatmap written in the folder it points to. Only
    a link at an image's own name was refused. Now every file of a run is made through no
    link below the folder given, and the run fails saying which. (The command refuses such a
    link before the run begins, tests/cli/test_numgen.py: skipped here, as for a link planted
    while the run goes.)"""
    from typer.testing import CliRunner

    from numerate.cli import app
    from numerate.numgen import batches

    monkeypatch.setattr(batches, "check_folders", lambda config: None)
    images, outside = tmp_path / "imgs", tmp_path / "outside"
    images.mkdir()
    outside.mkdir()
    (images / planted).symlink_to(outside)
    done = CliRunner().invoke(app, [
        "numgen", "run", "--generator", "synthetic", "--detector", "blobs", "--count", "1",
        "--db", str(tmp_path / "x.duckdb"), "--images-dir", str(images),
    ])  # fmt: skip
    assert done.exit_code == 3, done.output
    assert f"{images / planted}: a symbolic link; numerate follows no link out of" in done.output
    assert list(outside.iterdir()) == []
