"""`numerate deploy`: the Prefect deployments, work pools and schedules of deployments/."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from numerate.cli.app import app
from numerate.cli.common import fail
from numerate.kernel.errors import ConfigError, NumerateError, first_line, shorten


@app.command()
def deploy(
    cron: Annotated[str, typer.Option(help="When the nightly sweep runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of the cron schedule.")] = "UTC",
) -> None:
    """Create the work pools and deploy numerate's flows to the server at PREFECT_API_URL.

    Pools `cpu` and `gpu`; every deployment of deployments/prefect.yaml: nightly-sweep,
    evaluate, ingest, distributed-sweep, numgen and numgen-recount on `cpu`, numgen-generate
    and numgen-detect on `gpu`.
    """
    from numerate.server.lifecycle import api_answers, valid_api_url

    root = Path(__file__).resolve().parents[2]
    prefect_file = root / "deployments" / "prefect.yaml"
    try:
        if os.environ.get("PREFECT_API_URL"):  # before the schedule's check imports Prefect
            valid_api_url(os.environ["PREFECT_API_URL"])
        _check_schedule(cron, timezone)  # the command line first, then the environment
        if not os.environ.get("PREFECT_API_URL"):
            raise ConfigError(
                "PREFECT_API_URL is not set: start a server (prefect server start) and export "
                "PREFECT_API_URL=http://127.0.0.1:4200/api"
            )
        if not prefect_file.exists():
            raise ConfigError(f"no {prefect_file}: run numerate deploy from a numerate checkout")
        api_answers(os.environ["PREFECT_API_URL"])
    except NumerateError as error:
        fail(error)
        return
    from numerate.config.env import configure

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
        _step(what, command, root, env)
    typer.echo(
        f"nightly-sweep runs at '{cron}' ({timezone}) on pool cpu; start a worker with:\n"
        "  prefect worker start --pool cpu",
        err=True,
    )


def _step(what: str, command: list[str], root: Path, env: dict[str, str]) -> None:
    """One `prefect` command of the deployment, bounded; one error line when it fails."""
    try:
        done = subprocess.run(
            command, cwd=root, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        fail(f"creating the {what} took more than {STEP_TIMEOUT_S} s: stopped", code=3)
    if done.returncode != 0:
        fail(f"creating the {what} failed: {_why(done.stderr or done.stdout, done.returncode)}")
    typer.echo(f"created {what}", err=True)


def _why(output: str, code: int) -> str:
    """The line of a failed `prefect` command that says why: its exception's, else its last
    one that says something (pydantic's last line is a link: "For further information
    visit ..."); a server whose answers Prefect cannot read is said so."""
    from prefect import __version__

    lines = [line for line in output.splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", line)]
    if raised and "ValidationError" in raised[-1]:
        return (
            f"PREFECT_API_URL answers what Prefect {__version__} cannot read "
            f"({raised[-1].split(': ', 1)[-1]}): is it a Prefect {__version__} server?"
        )
    said = [
        line.strip() for line in lines
        if not line.lstrip().startswith("For further information")
        and line.strip() != "An exception occurred."
    ]  # fmt: skip
    return raised[-1] if raised else said[-1] if said else f"exit code {code}"


STEP_TIMEOUT_S = 300
"""The longest one step of `deploy` (a work pool, the deployments) may take."""


MAX_CRON_CHARS = 200
"""The longest cron expression `deploy` takes (a list of every minute of an hour is 170)."""


def _check_schedule(cron: str, timezone: str) -> None:
    """ConfigError for a schedule that cannot be the nightly sweep's: an unknown time zone, a
    cron expression Prefect refuses, one of more than five fields (Prefect reads a sixth as
    seconds: `0 2 * * * *` is 60 sweeps at 02:00), or one no date matches (`0 0 30 2 *`:
    the sweep would never run). Asked of Prefect's server schedule, which makes the runs."""
    if len(cron) > MAX_CRON_CHARS:
        raise ConfigError(f"--cron {shorten(repr(cron))}: {len(cron):,} characters, more than "
                          f"the {MAX_CRON_CHARS} a schedule may have")  # fmt: skip
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"--timezone {shorten(repr(timezone))} is not a known time zone"
        ) from None
    from prefect.server.schemas.schedules import CronSchedule

    try:  # a zone Python knows and Prefect refuses (`right/UTC`), or where no minute is
        every_minute = CronSchedule(cron="* * * * *", timezone=timezone)  # (`Factory`)
        known = bool(asyncio.run(every_minute.get_dates(n=1)))
    except Exception:  # croniter's own errors: said as the zone's
        known = False
    if not known:
        raise ConfigError(
            f"--timezone {shorten(repr(timezone))} is not a time zone Prefect's schedules take"
        )
    try:
        schedule = CronSchedule(cron=cron, timezone=timezone)
    except ValueError:
        raise ConfigError(f"--cron {cron!r} is not a valid cron expression") from None
    if not cron.strip().startswith("@") and len(cron.split()) != 5:
        raise ConfigError(f"--cron {cron!r}: give five fields, minute hour day month weekday "
                          "(a sixth is read as seconds)")  # fmt: skip
    try:
        fires, why = asyncio.run(schedule.get_dates(n=1)), ""
    except Exception as error:  # croniter's CroniterBadDateError: "failed to find next date"
        fires, why = [], f" ({first_line(error)})"
    if not fires:
        raise ConfigError(f"--cron {cron!r}: no date matches it{why}, so the sweep would never "
                          "run")  # fmt: skip
