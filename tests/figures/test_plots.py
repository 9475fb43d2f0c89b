"""numerate.figures.plots: frames built by hand, drawn for real, the images checked."""

import base64
import io
import itertools
import json
import re

import polars as pl
import pytest
from PIL import Image, ImageStat

from numerate.figures.plots import (
    figure_png,
    output_format,
    panels,
    render_run,
    run_figure_png,
    run_html,
)
from numerate.figures.prepare import choose_x, compare_points, curve_points, grid_parameters, pool
from numerate.kernel.errors import ConfigError
from numerate.kernel.stats import wilson_interval

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def point(model, manifold, correct, n_scored=10, chance=0.25, **params):
    key = ",".join(f"{k}={v}" for k, v in sorted(params.items())) or "default"
    return {
        "model": model, "manifold": manifold, "point_key": key,
        "params": json.dumps({**params, "count": n_scored}), "n_scored": n_scored,
        "correct": correct, "chance": chance,
    }  # fmt: skip


def run_points(models=("random", "oracle")):
    """Two models; objects on a 3 x 2 grid, sequence on 2 points, shuffle without a grid."""
    rows = []
    for rank, model in enumerate(models):
        for length, distractors in itertools.product([2, 4, 6], [0, 3]):
            correct = 10 if model == "oracle" else max(0, 8 - length - distractors + rank)
            grid = {"length": length, "distractor_count": distractors}
            rows.append(point(model, "objects", correct, **grid))
        for seq_length in (2, 4):
            rows.append(point(model, "sequence", 5 + rank, chance=0.1, seq_length=seq_length))
        rows.append(point(model, "shuffle", 3 + 2 * rank, chance=1 / 3))
    return pl.DataFrame(rows)


def decoded(png):
    assert png.startswith(PNG_MAGIC)
    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def assert_a_real_picture(png, min_width=400, min_height=300):
    image = decoded(png)
    assert image.width >= min_width and image.height >= min_height
    assert max(ImageStat.Stat(image.convert("L")).var) > 100  # not blank, not one colour


@pytest.mark.parametrize("kind", ["curves", "heatmap", "all"])
def test_each_kind_draws_a_non_blank_png(kind):
    assert_a_real_picture(run_figure_png(run_points(), "demo-0123456789ab", kind=kind))


def test_the_whole_figure_is_larger_than_its_parts():
    sizes = {
        kind: decoded(run_figure_png(run_points(), "r", kind=kind)).size
        for kind in ("curves", "heatmap", "all")
    }
    assert sizes["all"][1] > max(sizes["curves"][1], sizes["heatmap"][1])


def test_html_embeds_each_panel_as_png_with_the_run_id():
    page = run_html(run_points(), "demo-0123456789ab")
    assert page.startswith("<!doctype html>") and "demo-0123456789ab" in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 2  # curves and heatmap
    for image in images:
        assert_a_real_picture(base64.b64decode(image), min_width=300, min_height=200)
    assert "<table>" in page and "oracle" in page and "1.000 [" in page


def test_html_escapes_what_it_shows():
    frame = run_points(models=("<b>bold</b>",))
    page = run_html(frame, "run-<x>")
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "run-&lt;x&gt;" in page


def test_grid_parameters_most_values_first_and_none_without_a_grid():
    assert grid_parameters(run_points()) == {
        "objects": ["length", "distractor_count"],
        "sequence": ["seq_length"],
        "shuffle": [],
    }
    assert choose_x(run_points()) == {
        "objects": "length", "sequence": "seq_length", "shuffle": None,
    }  # fmt: skip


def test_a_grid_axis_with_one_value_is_still_a_grid_parameter():
    frame = pl.DataFrame([point("m", "objects", 3, length=4, distractor_count=d) for d in (0, 3)])
    assert grid_parameters(frame) == {"objects": ["distractor_count", "length"]}


def test_x_keeps_the_manifolds_that_have_it():
    assert choose_x(run_points(), "distractor_count") == {"objects": "distractor_count"}


def test_an_unknown_x_names_itself_and_the_valid_ones():
    with pytest.raises(ConfigError) as error:
        choose_x(run_points(), "colour")
    message = str(error.value)
    assert "'colour'" in message
    assert "objects: length, distractor_count" in message and "sequence: seq_length" in message
    with pytest.raises(ConfigError, match="'colour'"):
        run_figure_png(run_points(), "r", kind="heatmap", x="colour")


def test_curves_pool_the_other_parameters_with_a_wilson_interval_of_the_sums():
    frame = run_points()
    rows = curve_points(frame, choose_x(frame))
    at_two = rows.filter(
        (pl.col("manifold") == "objects") & (pl.col("model") == "random") & (pl.col("x") == "2")
    ).row(0, named=True)
    correct = 6 + 3  # length 2 with 0 and 3 distractors
    assert (at_two["correct"], at_two["n_scored"]) == (correct, 20)
    assert at_two["accuracy"] == pytest.approx(correct / 20)
    assert (at_two["ci_low"], at_two["ci_high"]) == pytest.approx(wilson_interval(correct, 20))
    shuffle = rows.filter(pl.col("manifold") == "shuffle")
    assert shuffle["x"].to_list() == ['"all"', '"all"']


def test_pool_weights_chance_and_leaves_no_scored_case_undefined():
    frame = pl.DataFrame(
        [point("m", "objects", 0, n_scored=0, chance=0.5, length=2),
         point("m", "objects", 0, n_scored=0, chance=0.5, length=4)]
    )  # fmt: skip
    row = pool(frame, ["model"]).row(0, named=True)
    assert row["accuracy"] is None and row["chance"] is None
    assert (row["ci_low"], row["ci_high"]) == (0.0, 1.0)
    assert_a_real_picture(run_figure_png(frame, "r"))  # a point without a scored case: grey


def test_pooled_points_of_several_samples_all_right_count_their_cases():
    # as stored: 20 and 30 cases x 10 samples, every answer right; the report's summary of
    # the two counts their 50 cases (numerate.kernel.design), and so does a plot's pooling
    frame = pl.DataFrame(
        [{**point("m", "objects", 10 * n, n_scored=10 * n, length=n), "accuracy": 1.0,
          "se": 0.0, "samples": 10} for n in (20, 30)]
    )  # fmt: skip
    row = pool(frame, ["model"]).row(0, named=True)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson_interval(50, 50))


def test_a_model_with_a_single_point_is_drawn():
    single = pl.DataFrame([point("one", "objects", 4, length=2, distractor_count=0)])
    frame = pl.concat([run_points(models=("many",)), single])
    assert_a_real_picture(run_figure_png(frame, "r"))
    alone = pl.DataFrame([point("one", "objects", 4, length=2)])
    assert_a_real_picture(run_figure_png(alone, "r"), min_width=300, min_height=200)


def test_text_parameters_are_categories_on_the_x_axis():
    frame = pl.DataFrame(
        [point("m", "objects", c, anchor=a) for c, a in ((2, "ROMAN"), (7, "ARABIC"), (5, "WORD"))]
    )
    assert choose_x(frame) == {"objects": "anchor"}
    rows = curve_points(frame, choose_x(frame))
    assert sorted(rows["x"]) == ['"ARABIC"', '"ROMAN"', '"WORD"']
    assert_a_real_picture(run_figure_png(frame, "r", kind="curves"), 300, 200)


def test_comparison_pools_only_the_points_both_runs_have():
    new = run_points()
    base = new.filter(pl.col("point_key") != "distractor_count=0,length=2").with_columns(
        correct=pl.col("correct") // 2
    )
    rows, only_base, only_new = compare_points(base, new)
    assert (only_base, only_new) == (0, 2)  # both models' missing point
    oracle = rows.filter((pl.col("model") == "oracle") & (pl.col("manifold") == "objects"))
    assert oracle.row(0, named=True)["n_scored"] == oracle.row(0, named=True)["n_scored_new"] == 50
    assert oracle["accuracy"][0] == pytest.approx(0.5) and oracle["accuracy_new"][0] == 1.0
    png = run_figure_png(new, "new", against=base, against_id="old", kind="compare")
    assert_a_real_picture(png)
    page = run_html(new, "new", against=base, against_id="old")
    assert page.count("data:image/png;base64,") == 3 and "+0.500" in page


def test_runs_without_a_common_point_cannot_be_compared():
    other = run_points().with_columns(model=pl.lit("someone else"))
    with pytest.raises(ConfigError, match="share no grid point"):
        compare_points(other, run_points())


def test_kind_compare_needs_a_second_run_and_kinds_are_checked():
    with pytest.raises(ConfigError, match="compare against"):
        panels(run_points(), kind="compare")
    with pytest.raises(ConfigError, match="'pie'"):
        panels(run_points(), kind="pie")
    assert len(panels(run_points(), kind="compare", against=run_points())) == 1


def test_missing_columns_and_no_rows_are_refused():
    with pytest.raises(ValueError, match="correct"):
        run_figure_png(run_points().drop("correct"), "r")
    with pytest.raises(ConfigError, match="no grid points"):
        run_figure_png(run_points().clear(), "r")


@pytest.mark.parametrize(
    ("path", "expected"),
    [("a.png", "png"), ("out/B.PNG", "png"), ("a.html", "html"), ("a.htm", "html")],
)
def test_output_format_by_suffix(path, expected):
    assert output_format(path) == expected
    content = render_run(run_points(), "r", expected, kind="heatmap")
    assert isinstance(content, bytes if expected == "png" else str)


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("a.svg", "--out a.svg: no .svg output; give a .png or .html or .htm file name"),
        ("plot", "--out plot: no suffix;"),
        # a trailing space read "no .png  output": the space is shown where it is
        ("p.png ", "--out 'p.png ': no '.png ' output;"),
        (" p.svg", "--out ' p.svg': no '.svg' output;"),
        ("a" * 300 + ".png ", "--out '…" + "a" * 194 + ".png ': no '.png ' output;"),
    ],
)
def test_other_suffixes_are_named(path, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        output_format(path)


def test_a_run_id_a_database_was_made_to_hold_draws_without_a_missing_glyph():
    """A hostile pass: a run id holding an escape sequence made matplotlib warn of each
    glyph it lacks, on standard error, with its source paths."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_a_real_picture(run_figure_png(run_points(), "r\x1b]0;x\x07", kind="curves"))


def test_figures_drawn_by_several_threads_at_once_warn_of_no_glyph_and_leave_the_filters():
    """A review: figure_png quiets matplotlib's missing-glyph warning with `catch_warnings`,
    which swaps the process's filters; the viewer draws its pages' figures in threads at
    once, and one thread leaving restored the filters away under another still drawing (its
    warnings shown), or left a filter of its own behind for good."""
    import threading
    import warnings

    from matplotlib.figure import Figure

    def draw() -> None:
        for _ in range(6):
            figure = Figure(figsize=(2, 1))
            figure.text(0.1, 0.5, "漢字 🙂 " * 8)
            figure_png(figure)

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        threads = [threading.Thread(target=draw) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert warnings.filters == before
    assert [str(w.message) for w in shown if "Glyph" in str(w.message)] == []


@pytest.mark.parametrize(
    "value",
    ["$\\frac{a$", "p" * 5_000, "\n漢字", "\n🙂", "\n\x1b]0;PWN\x07"],
    ids=["formula", "long", "chinese", "emoji", "escape"],
)
def test_a_grid_value_is_drawn_as_written_whatever_it_holds(value):
    """A hostile pass: matplotlib read `$\\frac{a$` (an anchor prefix) as a formula it could
    not parse, and `numerate plot` ended in a traceback; a value of 5,000 characters (a
    point's name may hold 10,000) squeezed the figure's axes to nothing, with a warning; a
    value its font has no glyph for (Chinese, an emoji, an escape sequence) was warned of, a
    glyph at a time, on standard error, with the escape sequence's own characters."""
    import warnings

    frame = pl.DataFrame(
        [point("m", "shuffle", c, anchor_prefix=a) for c, a in ((2, value), (7, "plain"))]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_a_real_picture(run_figure_png(frame, "r"), 300, 200)
        page = run_html(frame, "r")
    for image in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page):
        assert_a_real_picture(base64.b64decode(image), 300, 200)


@pytest.mark.parametrize("kind", ["curves", "heatmap"])
def test_no_text_a_figure_draws_holds_a_control_character(kind, monkeypatch):
    """A review: the curves drew a grid value's escape sequence as `\\x1b`, the heatmap's
    labels and a model's name in the legend drew it raw (a box, once its glyph warning was
    quiet). Every text drawn is checked once the figure is drawn."""
    import unicodedata

    import matplotlib.text

    from numerate.figures import plots

    drawn = []

    def keep(figure):
        png = figure_png(figure)
        drawn.extend(t.get_text() for t in figure.findobj(matplotlib.text.Text))
        return png

    monkeypatch.setattr(plots, "figure_png", keep)
    frame = pl.DataFrame(
        [point(m, "shuffle", c, anchor_prefix=a) for m in ("m\x1b[2J", "plain")
         for c, a in ((2, "\x1b]0;PWN\x07"), (7, "plain"))]
    )  # fmt: skip
    run_figure_png(frame, "r", kind=kind)
    assert any("PWN" in text for text in drawn) and any("[2J" in text for text in drawn)
    controls = [t for t in drawn if any(unicodedata.category(c) == "Cc" and c != "\n" for c in t)]
    assert not controls


def test_a_panel_title_of_two_lines_is_drawn_on_two_lines():
    """A first-contact review: the token budget's title was drawn with a literal `\\n` (the
    escaping of what a terminal acts on took the line break too)."""
    from numerate.figures.plots import Panel, compose

    figure = compose([Panel("Token budget\n(censored)\x1b", 4, 3, lambda target: None)], "r\x1b")
    [drawn] = [text.get_text() for subfigure in figure.subfigs for text in subfigure.texts]
    assert drawn == "Token budget\n(censored)\\x1b"
    assert [text.get_text() for text in figure.texts] == ["r\\x1b"]
