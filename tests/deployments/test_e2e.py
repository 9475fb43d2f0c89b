"""Deployments for real: a Prefect server, the pools, `numerate deploy`, a process worker and
an on-demand run, all on 127.0.0.1 and all stopped at the end. Run alone: pytest -m e2e."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.prefect_server import migrated_database, start_prefect_server, stop
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.slow]
RUN_DEADLINE_S = 400
"""How long a deployment's run (or the Dask scenario's sweep) may take before the test calls
it hung: a bound, not a timing.
Alone here the on-demand run takes about 20 s; beside the rest of the suite on two cores CI saw
it take over 100 s (a worker's flow process imports Prefect and numerate on a busy machine)."""


def run_to_completion(url, name, **kwargs):
    """Runs deployment `name` through the server at `url` and returns its flow run, completed."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}):
        flow_run = run_deployment(name, timeout=RUN_DEADLINE_S, **kwargs)  # sync outside a loop
    assert flow_run.state.is_completed(), (name, flow_run.state)
    return flow_run


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    migrated_database(home)  # its start is what is tested, not Prefect's migrations
    env = dict(
        os.environ,
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "w")  # noqa: SIM115
    try:
        server, url = start_prefect_server(env, log, timeout_s=60)
    except RuntimeError:
        log.close()
        pytest.fail(f"prefect server did not start: {(home / 'server.log').read_text()}")
    env = dict(
        env,
        PREFECT_API_URL=url,
        PREFECT_WORKER_QUERY_SECONDS="1",
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        PREFECT_LOGGING_TO_API_ENABLED="false",
    )
    try:
        yield url, env
    finally:
        stop(server)
        log.close()


@pytest.fixture(scope="module")
def deployed(prefect_server):
    url, env = prefect_server
    done = subprocess.run(
        [sys.executable, "-m", "numerate.cli", "deploy"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prefect",
                "worker",
                "start",
                "--pool",
                pool,
                "--type",
                "process",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for pool in ("cpu", "gpu")
    ]

    async def ready(client):
        pools = [await client.read_work_pool(pool) for pool in ("cpu", "gpu")]
        return all(pool.status.value == "READY" for pool in pools)

    try:  # a step dispatched `auto` to a pool no worker polls yet runs in the caller instead
        wait_until(lambda: asyncio.run(read(url, ready)), 120, "a worker polling each pool")
        yield url
    finally:
        for worker in workers:
            stop(worker)


async def read(url, call):
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}):
        async with get_client() as client:
            return await call(client)


def test_pools_exist_and_the_nightly_deployment_carries_its_cron(deployed):
    async def inspect(client):
        pools = {p.name: p.type for p in await client.read_work_pools()}
        nightly = await client.read_deployment_by_name("nightly-sweep/nightly-sweep")
        gpu = await client.read_work_pool("gpu")
        return pools, nightly, gpu

    pools, nightly, gpu = asyncio.run(read(deployed, inspect))
    assert pools["cpu"] == pools["gpu"] == "process"
    assert nightly.work_pool_name == "cpu"
    assert nightly.parameters == {"config_path": "deployments/sweeps/nightly.yaml"}
    [schedule] = nightly.schedules
    assert (schedule.schedule.cron, schedule.schedule.timezone) == ("0 2 * * *", "UTC")
    env_default = gpu.base_job_template["variables"]["properties"]["env"]["default"]
    assert "PYTORCH_CUDA_ALLOC_CONF" in env_default


def test_an_on_demand_run_lands_in_duckdb(deployed, tmp_path, fake_openai):
    db = tmp_path / "e2e.duckdb"
    config = tmp_path / "sweep.yaml"
    config.write_text(
        "name: e2e\nmodels:\n"
        f"  - {{name: fake, model: fake-model, base_url: '{fake_openai.base_url}'}}\n"
        "  - {name: oracle, model: 'baseline:oracle'}\n"
        "manifolds:\n  - {manifold: objects, count: 3}\n  - {manifold: sequence, count: 3}\n"
    )
    parameters = {"config_path": str(config), "manifolds": ["objects"], "db": str(db)}
    run_to_completion(deployed, "evaluate/evaluate", parameters=parameters)
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT model, manifold, count(*) FROM responses GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        oracle = con.execute(
            "SELECT accuracy FROM summaries WHERE model = 'oracle' AND level = 'model'"
        ).fetchone()
    finally:
        con.close()
    assert rows == [("fake", "objects", 3), ("oracle", "objects", 3)]
    assert oracle == (1.0,)
    assert len(fake_openai.prompts()) == 3


def test_numgen_sends_generation_and_detection_to_the_gpu_pool(deployed, tmp_path):
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    db = tmp_path / "numgen.duckdb"
    config = {"generator": "synthetic", "detector": "blobs", "prompts": {"per_number": 1},
              "images_dir": str(tmp_path / "images")}  # fmt: skip
    run_to_completion(deployed, "numgen/numgen", parameters={"config": config, "db": str(db)})

    async def gpu_runs(client):
        found = {}
        for name in ("numgen-generate/numgen-generate", "numgen-detect/numgen-detect"):
            deployment = await client.read_deployment_by_name(name)
            runs = await client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
            )
            found[name] = [(r.work_pool_name, r.state.type.value) for r in runs]
        return found

    assert asyncio.run(read(deployed, gpu_runs)) == {
        "numgen-generate/numgen-generate": [("gpu", "COMPLETED")],
        "numgen-detect/numgen-detect": [("gpu", "COMPLETED")],
    }
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT n, accuracy FROM numgen_metrics").fetchall() == [(10, 1.0)]
    finally:
        con.close()


def test_one_sweep_scales_out_over_a_dask_cluster(prefect_server, tmp_path):
    """The distributed sweep with Prefect's DaskTaskRunner on a local cluster of two worker
    processes (Dask needs a real Prefect server: each worker talks to it). It runs in its own
    process: see tests/deployments/dask_scenario.py."""
    import json

    _, env = prefect_server
    done = subprocess.run(
        [sys.executable, "-m", "tests.deployments.dask_scenario", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_DEADLINE_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(result["run_ids"]) == 2 and result["workers"] == 2
    assert result["ran_on_dask"], "the parts did not run on the Dask cluster"
    con = duckdb.connect(str(tmp_path / "central.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT model, count(*) FROM responses GROUP BY ALL ORDER BY ALL")
        assert rows.fetchall() == [("oracle", 10), ("random", 10)]
    finally:
        con.close()


def test_deployments_on_both_pools_write_to_a_lake(deployed, lake, tmp_path):
    """A team's lake from the pools' workers: an on-demand sweep on `cpu`, a NumGen run whose
    images and counts are made on `gpu`, both written to the lake directly (no shard, no
    ingest), each worker journaling on its own disk (the deployment's job variables)."""
    from numerate.store import Store

    Store.open(lake).close()  # made here, with NUMERATE_LAKE_DATA: the workers find it made
    config = tmp_path / "sweep.yaml"
    config.write_text("name: lake\nmodels:\n  - {name: oracle, model: 'baseline:oracle'}\n"
                      "manifolds:\n  - {manifold: objects, count: 4}\n")  # fmt: skip
    numgen = {"generator": "synthetic", "detector": "blobs", "prompts": {"per_number": 1},
              "images_dir": str(tmp_path / "images")}  # fmt: skip
    worker_env = {"env": {"NUMERATE_LAKE_JOURNALS": str(tmp_path / "worker-journals")}}
    for name, parameters in [
        ("evaluate/evaluate", {"config_path": str(config), "db": lake}),
        ("numgen/numgen", {"config": numgen, "db": lake}),
    ]:
        run_to_completion(deployed, name, parameters=parameters, job_variables=worker_env)
    store = Store.open(lake)
    assert store.query("SELECT model, outcome, count(*) FROM responses GROUP BY ALL") == [
        ("oracle", "correct", 4)
    ]
    assert store.query("SELECT status FROM runs") == [("finished",)]
    assert store.query("SELECT n, accuracy FROM numgen_metrics") == [(10, 1.0)]
