"""`numerate numgen` with models behind endpoints, from the user's side: the loopback fake
Images API and vision model, bad settings refused before anything is written, recounts."""

import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from numerate.cli import app
from tests.fake_openai import FakeOpenAI

runner = CliRunner()


@pytest.fixture
def endpoint():
    with FakeOpenAI() as server:
        yield server


def write_config(path, **values):
    path.write_text(yaml.safe_dump(values))
    return str(path)


@pytest.mark.parametrize(
    ("settings", "options", "said"),
    [
        ({}, ["--generator", "apx:model"], "apx: is no kind of generator numerate knows"),
        ({}, ["--generator", "api:model"],
         "generation.base_url: api:model is asked at an endpoint"),
        ({}, ["--generator", "vlm:model"], "vlm: names a counter, not a generator"),
        ({"generation": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "NO_SUCH_KEY_X"}},
         ["--generator", "api:model"], "environment variable NO_SUCH_KEY_X is not set"),
        ({"generation": {"base_url": "http://127.0.0.1:9/v1"}},
         ["--generator", "api:dall-e-3", "--size", "512"],
         "generation.size '512x512': dall-e-3 makes images of 1024x1024, 1792x1024, 1024x1792"),
        ({"generation": {"base_url": "ftp://127.0.0.1:9/v1"}}, ["--generator", "api:model"],
         "must start with http:// or https://"),
        ({}, ["--generator", "synthetic", "--detector", "vlm:model"],
         "detection.base_url: vlm:model is asked at an endpoint"),
        ({"generation": {"base_url": "http://127.0.0.1:9/v1", "steps": 4}},
         ["--generator", "api:model"], "generation.steps = 4: the api:model generator"),
    ],
)  # fmt: skip
def test_bad_endpoint_settings_are_one_error_line_and_nothing_is_written(
    tmp_path, settings, options, said
):
    db = tmp_path / "r.duckdb"
    config = write_config(tmp_path / "c.yaml", **settings)
    counter = [] if "--detector" in options else ["--detector", "blobs"]
    result = runner.invoke(
        app, ["numgen", "run", *options, *counter, "--config", config, "--db", str(db),
              "--dispatch", "local", "--images-dir", str(tmp_path / "images")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], lines
    assert not db.exists() and not (tmp_path / "images").exists()


def test_run_recount_and_report_against_the_fakes(tmp_path, endpoint):
    db, images = str(tmp_path / "r.duckdb"), str(tmp_path / "images")
    config = write_config(
        tmp_path / "c.yaml", generator="api:fake-image",
        generation={"base_url": endpoint.base_url, "size": "256x256"},
        detection={"base_url": endpoint.base_url},
    )  # fmt: skip
    result = runner.invoke(
        app, ["numgen", "run", "--config", config, "--detector", "blobs", "--detector",
              "vlm:fake-vision", "--count", "1", "--db", db, "--dispatch", "local",
              "--images-dir", images],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "counted again by vlm:fake-vision" in result.stdout
    assert "agreement of the counters" in result.stdout
    [agreement_row] = [line for line in result.stdout.splitlines() if "│ blobs" in line]
    assert "│ 10 │" in agreement_row and "1.000" in agreement_row
    asked = len(endpoint.image_requests)
    assert asked == 10
    # counted again by the vision model: no image asked for
    recounted = runner.invoke(
        app, ["numgen", "recount", "latest", "--detector", "vlm:fake-vision", "--config",
              config, "--db", db, "--dispatch", "local"],
    )  # fmt: skip
    assert recounted.exit_code == 0, recounted.output
    assert len(endpoint.image_requests) == asked
    assert "agreement of the counters" in recounted.stdout
    with duckdb.connect(db, read_only=True) as con:
        linked = con.execute("SELECT count(*) FROM numgen_runs WHERE source_run_id IS NOT NULL")
        assert linked.fetchall() == [(2,)]
    report = runner.invoke(app, ["numgen", "report", "--db", db])
    assert report.exit_code == 0, report.output
    assert "agreement of the counters" in report.stdout
    # a recount of a run that is not there, or of a counter it cannot use: one line, exit 2
    for options, said in (
        (["nope", "--detector", "blobs"], "'nope': no NumGen run with metrics"),
        (["", "--detector", "blobs"], "RUN '': give an id, a unique prefix"),  # not every run
        ([" ", "--detector", "blobs"], "RUN ' ': give an id, a unique prefix"),
        (["latest", "--detector", "vlm:x"], "detection.base_url: vlm:x is asked at an endpoint"),
    ):
        bad = runner.invoke(app, ["numgen", "recount", *options, "--db", db])
        assert bad.exit_code == 2, bad.output
        assert said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_a_vision_counter_is_calibrated_on_synthetic_images(tmp_path, endpoint):
    db = str(tmp_path / "r.duckdb")
    config = write_config(tmp_path / "c.yaml", detection={"base_url": endpoint.base_url})
    result = runner.invoke(
        app, ["numgen", "calibrate", "--detector", "vlm:fake-vision", "--config", config,
              "--count", "1", "--db", db, "--dispatch", "local",
              "--images-dir", str(tmp_path / "images")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "overall: 1.000 over 10 images" in result.stdout
    assert endpoint.vision_requests == 10 and not endpoint.image_requests


def test_a_recount_needs_none_of_the_generators_settings(tmp_path, endpoint, monkeypatch):
    """A recount makes no image: the generator's key variable, unset since, is not asked for."""
    db, images = str(tmp_path / "r.duckdb"), str(tmp_path / "images")
    monkeypatch.setenv("FAKE_IMAGE_KEY", "sk-image-key")
    config = write_config(
        tmp_path / "c.yaml", generator="api:fake-image",
        generation={"base_url": endpoint.base_url, "api_key_env": "FAKE_IMAGE_KEY"},
    )  # fmt: skip
    made = runner.invoke(app, ["numgen", "run", "--config", config, "--detector", "blobs",
                               "--count", "1", "--db", db, "--dispatch", "local",
                               "--images-dir", images])  # fmt: skip
    assert made.exit_code == 0, made.output
    monkeypatch.delenv("FAKE_IMAGE_KEY")
    counters = write_config(tmp_path / "d.yaml", detection={"base_url": endpoint.base_url})
    again = runner.invoke(app, ["numgen", "recount", "latest", "--detector", "vlm:fake-vision",
                                "--config", counters, "--db", db])  # fmt: skip
    assert again.exit_code == 0, again.output
    assert len(endpoint.image_requests) == 10 and endpoint.vision_requests == 10
