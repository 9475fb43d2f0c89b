"""What a sweep shows in Prefect, read back from the server: its results table and summary
under keys that keep each night's version, progress, names and tags."""

import asyncio
import os

import pytest
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterTags,
)
from prefect.client.schemas.sorting import ArtifactSort

from numerate.config.sweep import parse_sweep_config
from numerate.flows.sweep import sweep

pytestmark = pytest.mark.usefixtures("prefect_harness")

CONFIG = {
    "name": "artifacts-test",
    "seed": 5,
    "batch_size": 10,
    "models": [
        {"name": "oracle", "model": "baseline:oracle"},
        {"name": "random", "model": "baseline:random"},
    ],
    "manifolds": [{"manifold": "objects", "count": 10, "grid": {"length": [2, 3]}}],
}


async def artifacts(key):
    async with get_client() as client:
        return await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
        )


async def tagged_runs(tag):
    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[tag]))
        )
        tasks = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[r.id for r in runs]))
        )
    return runs, tasks


@pytest.fixture
def recording_task_runs(tmp_path):
    """A Prefect server of the test's own that records task runs, this test's flows reporting
    to it. The session's server does not record them (tests/conftest.py): its recorder waited
    up to 60 s for SQLite's lock with the server's event loop held, under several workers."""
    from prefect.events.worker import EventsWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tests.prefect_server import migrated_database, start_prefect_server, stop

    migrated_database(tmp_path / "server")
    server, url = start_prefect_server(dict(os.environ, PREFECT_HOME=str(tmp_path / "server")))
    try:  # Prefect's events worker of this process sends to the server it was started for:
        EventsWorker.drain_all(timeout=30)  # the next one is this test's, then the session's
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url
            EventsWorker.drain_all(timeout=30)
    finally:
        stop(server)


@pytest.mark.usefixtures("recording_task_runs")
def test_a_sweep_publishes_results_summary_comparison_and_progress(db_path, tmp_path):
    from prefect import tags

    from numerate.flows.sweep import run_tags
    from numerate.kernel.progress import LogProgress, reporting_to

    leftover = LogProgress()  # what runs before in this process counted: one ended 7 short
    leftover.add_total(10)
    leftover.advance(3)
    with reporting_to(leftover), tags(*run_tags(parse_sweep_config(CONFIG))):
        first = asyncio.run(sweep(CONFIG, db_path))
        second = asyncio.run(sweep(CONFIG, db_path, fresh=True))

    tables = asyncio.run(artifacts("artifacts-test-results"))
    assert [t.description for t in tables] == [f"run {second}", f"run {first}"]
    rows = tables[0].data
    rows = rows if isinstance(rows, list) else __import__("json").loads(rows)
    oracle = [r for r in rows if r["model"] == "oracle" and r["manifold"] == "objects"]
    assert oracle and oracle[0]["accuracy"] == "1.000" and oracle[0]["n"] == 20

    [summary, earlier] = asyncio.run(artifacts("artifacts-test-summary"))
    assert second in summary.data and "finished" in summary.data
    assert f"Against `{first}`" in summary.data  # compared with the previous night
    assert "0 regressions, 0 improvements, 2 no change" in summary.data
    assert "No previous run" in earlier.data
    assert "Plot: `" in summary.data

    progress = asyncio.run(artifacts("artifacts-test-progress"))  # each run's: 100%
    assert [float(p.data) for p in progress] == [pytest.approx(100.0)] * 2

    runs, task_runs = asyncio.run(tagged_runs("sweep:artifacts-test"))
    named = [r for r in runs if r.name.startswith("artifacts-test ")]
    assert len(named) == 2
    assert {"model:oracle", "model:random"} <= set(named[0].tags)
    assert not any(tag.startswith(("sweep:", "model:")) for t in task_runs for tag in t.tags)
    names = {t.name for t in task_runs}
    assert {"query oracle/objects 1–10", "query oracle/objects 11–20"} <= names
    assert "query random/objects 11–20" in names  # answered and graded in one task
    assert not any(name.startswith("grade ") for name in names)


def test_a_sweep_with_a_view_dir_links_its_summary_to_its_pages(db_path, tmp_path):
    """With `view_dir`, each run writes its pages of `numerate view` (and those of the run it is
    compared with) under view_dir/RUN_ID/, and its summary artifact and a link artifact point to
    its page; every link of those pages lands."""
    import html
    import re

    config = {**CONFIG, "name": "view-test", "view_dir": str(tmp_path / "pages")}
    first = asyncio.run(sweep(config, db_path))
    second = asyncio.run(sweep(config, db_path, fresh=True))
    page = tmp_path / "pages" / second / "runs" / second / "index.html"
    assert page.is_file()
    [summary, _] = asyncio.run(artifacts("view-test-summary"))
    assert f"[{page}]({page.as_uri()})" in summary.data
    [link, _] = asyncio.run(artifacts("view-test-view"))
    assert page.as_uri() in link.data
    folder = tmp_path / "pages" / second
    runs = {path.parent.name for path in folder.glob("runs/*/index.html")}
    assert runs == {first, second}  # the run and the one it is compared with
    for file in folder.rglob("*.html"):
        for href in re.findall(r'href="([^"#]+)', file.read_text()):
            assert (file.parent / html.unescape(href)).resolve().is_file(), (file, href)


def test_the_nightly_flow_fails_on_a_regression_against_the_previous_night(db_path, tmp_path):
    import yaml

    from numerate.flows.sweep import nightly_sweep

    def night(model, alpha=0.05):
        path = tmp_path / f"{model}.yaml"
        models = [{"name": "m", "model": f"baseline:{model}"}]
        manifolds = [{"manifold": "objects", "count": 30, "grid": {"length": 3}}]
        path.write_text(yaml.safe_dump({"name": "gate", "models": models, "manifolds": manifolds}))
        return asyncio.run(
            nightly_sweep(str(path), db_path, regression_alpha=alpha, return_state=True)
        )

    first = night("random")
    assert first.is_completed()  # nothing to compare with on the first night
    better = night("oracle")
    assert better.is_completed()  # an improvement passes
    [summary, *_] = asyncio.run(artifacts("gate-summary"))
    assert "alpha 0.05," in summary.data and "--alpha" not in summary.data
    worse = night("random", alpha=0.01)
    assert worse.is_failed()
    assert "regressed against the previous run: m/objects 1.000 -> " in worse.message
    # the summary's comparison is the gate's: at its alpha (a fresh-eyes review: it was 0.05)
    [summary, *_] = asyncio.run(artifacts("gate-summary"))
    assert "alpha 0.01," in summary.data and "--alpha 0.01`" in summary.data
