"""Operating numerate on Prefect: `numerate deploy` and `numerate ingest`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import DB_HELP, fail, results_db
from numerate.kernel.errors import ConfigError, NumerateError


@app.command()
def deploy(
    cron: Annotated[str, typer.Option(help="When the nightly sweep runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of the cron schedule.")] = "UTC",
) -> None:
    """Create the work pools and deploy numerate's flows to the server at PREFECT_API_URL.

    Pools `cpu` and `gpu`; every deployment of deployments/prefect.yaml: nightly-sweep,
    evaluate, ingest, distributed-sweep and numgen on `cpu`, numgen-generate and numgen-detect
    on `gpu`.
    """
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    prefect_file = root / "deployments" / "prefect.yaml"
    try:
        if not os.environ.get("PREFECT_API_URL"):
            raise ConfigError(
                "PREFECT_API_URL is not set: start a server (prefect server start) and export "
                "PREFECT_API_URL=http://127.0.0.1:4200/api"
            )
        if not prefect_file.exists():
            raise ConfigError(f"no {prefect_file}: run numerate deploy from a numerate checkout")
        _check_schedule(cron, timezone)
    except NumerateError as error:
        fail(error)
        return
    from numerate.env import configure

    configure()
    prefect = [sys.executable, "-m", "prefect"]
    gpu_template = root / "deployments" / "pools" / "gpu-process.json"
    steps = [
        ("work pool cpu", [*prefect, "work-pool", "create", "cpu", "--type", "process",
                           "--overwrite"]),
        ("work pool gpu", [*prefect, "work-pool", "create", "gpu", "--type", "process",
                           "--base-job-template", str(gpu_template), "--overwrite"]),
        ("deployments", [*prefect, "--no-prompt", "deploy", "--all", "--prefect-file",
                         str(prefect_file)]),
    ]  # fmt: skip
    env = dict(
        os.environ,
        NUMERATE_ROOT=str(root),
        NUMERATE_NIGHTLY_CRON=cron,
        NUMERATE_NIGHTLY_TIMEZONE=timezone,
    )
    for what, command in steps:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            fail(f"creating the {what} failed: {detail[-1] if detail else done.returncode}")
        typer.echo(f"created {what}", err=True)
    typer.echo(
        f"nightly-sweep runs at '{cron}' ({timezone}) on pool cpu; start a worker with:\n"
        "  prefect worker start --pool cpu",
        err=True,
    )


def _check_schedule(cron: str, timezone: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"--timezone {timezone!r} is not a known time zone") from None
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValueError:
        raise ConfigError(f"--cron {cron!r} is not a valid cron expression") from None


@app.command()
def ingest(
    results_dir: Annotated[str, typer.Argument(help="Results location (folder or fsspec URL).")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Load the Parquet shards of runs made on other workers (complete, not yet loaded)."""
    from numerate.store import Store, shards
    from numerate.verdict import EXIT_RUN_FAILED

    db = results_db(db)
    try:
        shards.complete_runs(results_dir)  # a missing location fails before the database opens
        done = shards.ingest(Store.open(db), results_dir)
    except NumerateError as error:
        fail(error)
    loaded = done.loaded
    typer.echo(f"ingested {len(loaded)} run(s) into {db}" + "".join(f"\n  {r}" for r in loaded))
    for run_id, reason in done.skipped:
        typer.echo(f"warning: skipped run {run_id}: its shards cannot be read: {reason}", err=True)
    if done.skipped:
        fail(f"{len(done.skipped)} run(s) skipped; fix or remove their shards and ingest again",
             EXIT_RUN_FAILED)  # fmt: skip
