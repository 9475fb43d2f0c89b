"""`numerate plot` on a real database: two small baseline runs made through the CLI."""

import base64
import io
import re
import shutil

import duckdb
import pytest
from PIL import Image, ImageStat
from typer.testing import CliRunner

from numerate.cli import app
from tests.cli.test_run import one_error_line, write_config

runner = CliRunner()

MANIFOLDS = [
    {"manifold": "objects", "count": 2, "grid": {"length": [2, 4, 6], "distractor_count": [0, 2]}},
    {"manifold": "sequence", "count": 2},
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A database with two runs of the baselines (different seeds), and their ids, newest
    first."""
    from numerate.store import Store

    folder = tmp_path_factory.mktemp("plot")
    db = folder / "results.duckdb"
    models = [{"name": "random", "model": "baseline:random"},
              {"name": "oracle", "model": "baseline:oracle"}]  # fmt: skip
    for seed in (1, 2):
        config = write_config(folder / f"s{seed}.yaml", models, MANIFOLDS, seed=seed)
        result = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
        assert result.exit_code == 0, result.output
    Store.close_all()
    con = duckdb.connect(str(db), read_only=True)
    ids = [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at DESC").fetchall()]
    con.close()
    return db, ids


def plot(db, *arguments):
    return runner.invoke(app, ["plot", *arguments, "--db", str(db)])


def a_real_picture(path):
    image = Image.open(path)
    image.load()
    assert image.format == "PNG" and image.width > 400 and image.height > 300
    assert max(ImageStat.Stat(image.convert("L")).var) > 100
    return image


def test_the_latest_run_by_default_into_plot_run_id_png(results, tmp_path, monkeypatch):
    db, (latest, _) = results
    monkeypatch.chdir(tmp_path)
    result = plot(db)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"plot-{latest}.png"
    a_real_picture(tmp_path / f"plot-{latest}.png")


def test_png_and_html_by_suffix(results, tmp_path):
    db, (latest, _) = results
    result = plot(db, "latest", "--out", str(tmp_path / "x.png"))
    assert result.exit_code == 0 and result.stdout.strip() == str(tmp_path / "x.png")
    a_real_picture(tmp_path / "x.png")
    result = plot(db, latest[:-4], "--out", str(tmp_path / "x.html"))
    assert result.exit_code == 0, result.output
    page = (tmp_path / "x.html").read_text()
    assert latest in page
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(images) == 3  # curves, heatmap, and the token budget: the answers have tokens
    assert "Token budget" in page
    a_real_picture(io.BytesIO(base64.b64decode(images[0])))


def test_the_budget_is_drawn_alone_and_is_refused_without_token_counts(results, tmp_path):
    db, _ = results
    out = tmp_path / "b.png"
    result = plot(db, "--kind", "budget", "--out", str(out))
    assert result.exit_code == 0, result.output
    a_real_picture(out)
    copy = tmp_path / "no-tokens.duckdb"  # answers without a token count: no budget to draw
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute("UPDATE responses SET completion_tokens = NULL")
    finally:
        con.close()
    line = one_error_line(plot(copy, "--kind", "budget", "--out", str(out)))
    assert "no answer with a token count" in line


def test_x_chooses_the_curves_parameter(results, tmp_path):
    db, _ = results
    out = tmp_path / "d.png"
    result = plot(db, "--x", "distractor_count", "--kind", "curves", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "no grid parameter 'distractor_count' in sequence" in result.stderr
    a_real_picture(out)


def test_an_unknown_x_names_the_valid_parameters(results, tmp_path):
    db, _ = results
    line = one_error_line(plot(db, "--x", "colour", "--out", str(tmp_path / "c.png")))
    assert "--x 'colour'" in line and "objects: length, distractor_count" in line
    assert not (tmp_path / "c.png").exists()
    heatmap = plot(db, "--x", "length", "--kind", "heatmap", "--out", str(tmp_path / "h.png"))
    line = one_error_line(heatmap)  # before: drawn, the --x ignored
    assert "--x 'length' chooses the curves' x axis, and --kind heatmap draws no curves" in line
    assert not (tmp_path / "h.png").exists()


def test_against_previous(results, tmp_path):
    db, (latest, previous) = results
    out = tmp_path / "c.html"
    result = plot(db, "--against", "previous", "--out", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert (
        latest in page and previous in page and page.count("data:image/png;base64,") == 4
    )  # and the budget
    result = plot(db, "--against", previous, "--kind", "compare", "--model", "oracle",
                  "--out", str(tmp_path / "c.png"))  # fmt: skip
    assert result.exit_code == 0, result.output
    a_real_picture(tmp_path / "c.png")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nosuchrun"], "run 'nosuchrun': no run"),
        (["--out", "plot.svg"], "--out plot.svg: no .svg output"),
        (["--kind", "pie"], "--kind 'pie': choose curves, heatmap, budget, all or compare"),
        (["--kind", "compare"], "--kind compare needs --against"),
        (["--model", "nobody"], "--model 'nobody': run "),
        (["--manifold", "shuffle"], "it has objects, sequence"),
        (["--against", "latest"], "itself: nothing to compare"),
        (["--against", "nosuchrun"], "run 'nosuchrun': no run"),
    ],
)
def test_garbage_is_one_line_and_exit_2(results, tmp_path, arguments, message):
    db, _ = results
    if "--out" not in arguments:
        arguments = [*arguments, "--out", str(tmp_path / "p.png")]
    assert message in one_error_line(plot(db, *arguments))
    assert not (tmp_path / "p.png").exists()


def test_an_unwritable_path_is_one_line(results, tmp_path):
    db, _ = results
    (tmp_path / "taken.png").mkdir()
    before = sorted(tmp_path.rglob("*"))
    line = one_error_line(plot(db, "--out", str(tmp_path / "taken.png")))
    assert f"--out {tmp_path / 'taken.png'}: a folder; give a file name" in line
    assert sorted(tmp_path.rglob("*")) == before  # no DIR.png, no stray temporary file
    slashed = one_error_line(plot(db, "--out", f"{tmp_path / 'new.png'}/"))  # corpus H: a file
    assert f"--out {tmp_path / 'new.png'}/: a folder's name (it ends with /)" in slashed  # new.png
    folder = one_error_line(plot(db, "--out", f"{tmp_path / 'taken.png'}/"))  # corpus J: a folder
    assert f"--out {tmp_path / 'taken.png'}/: a folder's name" in folder  # not "no suffix"
    plain = one_error_line(plot(db, "--out", f"{tmp_path}/"))
    assert "a folder's name" in plain and "suffix" not in plain
    assert sorted(tmp_path.rglob("*")) == before


def test_a_missing_database_and_an_empty_run(results, tmp_path):
    db, (latest, _) = results
    line = one_error_line(plot(tmp_path / "none.duckdb"))
    assert "no results database" in line
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute(
        "INSERT INTO runs (run_id, sweep_name, config_hash, config, code_version, status, "
        "started_at) SELECT 'empty-000000000000', sweep_name, config_hash, config, code_version, "
        "'failed', now() FROM runs WHERE run_id = ?",
        [latest],
    )
    con.close()
    line = one_error_line(plot(copy, "--out", str(tmp_path / "e.png")))
    assert "run empty-000000000000 (failed) has no grid points to plot" in line


def test_a_point_with_counts_no_run_can_have_is_one_line_naming_it(results, tmp_path):
    """Issue 41, found from outside: a stored point with a negative `correct` (a database
    changed by hand) ended `plot` in a ValueError traceback (exit 1). A hostile pass: `report`
    showed such figures (n -10, accuracy nan [-5.000, inf]) without a word."""
    import shutil

    db, [newest, _] = results
    changed = tmp_path / "changed.duckdb"
    shutil.copy(db, changed)
    con = duckdb.connect(str(changed))
    con.execute("UPDATE points SET correct = -3 WHERE run_id = ? AND model = 'oracle'", [newest])
    con.close()
    out = tmp_path / "p.png"
    done = plot(changed, newest, "--out", str(out))
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith(f"error: run {newest}: model oracle, ") and (
        "holds correct -3, figures no run can have" in done.stderr
    )
    assert f"`numerate regrade --run {newest}` counts them again" in done.stderr
    assert not out.exists()
    con = duckdb.connect(str(changed))
    con.execute("UPDATE summaries SET n = -10 WHERE run_id = ? AND model = 'oracle'", [newest])
    con.close()
    for report in (["--run", newest], ["--run", newest, "--points"]):
        done = runner.invoke(app, ["report", *report, "--db", str(changed)])
        assert done.exit_code == 2, done.output
        assert done.stderr.startswith(f"error: run {newest}: model oracle, "), done.stderr
