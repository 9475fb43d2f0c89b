"""`numerate run`: a sweep from the command line, with a progress bar and its report."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    Format,
    check_format,
    fail,
    if_stopped_say,
    on_hard_stop,
    path_option,
    print_report,
    quiet_exit,
    quiet_run_logs,
    said_to_have_ended,
    say_once,
    settle_prefect,
    stop_code,
    stop_signals,
    terminal_progress,
)
from numerate.kernel.errors import ConfigError, NumerateError

if TYPE_CHECKING:
    from datetime import datetime

    from numerate.cli.server import Server
    from numerate.config import SweepConfig
    from numerate.preflight import Preflight


NOT_STARTED = "the run had not started; nothing was stored"
"""What a stop before a run begins (while Prefect's server starts) leaves."""


@app.command()
def run(
    config: Annotated[
        Path | None,
        path_option("Sweep config (YAML). Default: the built-in sweep.", "--config", "-c"),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            help="DuckDB results file (overrides the config; default: $NUMERATE_DB, else "
            "results/numerate.duckdb)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Evaluate only this model id (with --base-url).")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Endpoint for --model, e.g. http://127.0.0.1:8000/v1.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Label for --model in the results.")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the API key for --model."),
    ] = None,
    fresh: Annotated[
        bool, typer.Option(help="Start a new run instead of resuming an unfinished one.")
    ] = False,
    output: Annotated[
        str, typer.Option("--format", help="Report format: table, csv, json or markdown.")
    ] = "table",
) -> None:
    """Run a sweep: generate, ask, grade, aggregate, store; then print the results."""
    if_stopped_say(NOT_STARTED)
    sweep_config, fmt, db_path, server, unusable = prepare(
        (config, model, base_url, name, api_key_env), db, fresh, output
    )  # first: it starts Prefect's server when none runs
    if_stopped_say(None)  # run_sweep says how it stopped
    from numerate.kernel import stopping
    from numerate.store import Store
    from numerate.verdict import EXIT_RUN_FAILED, RunFailed

    failure = None
    try:
        run_id = run_sweep(sweep_config, db_path, fresh, server, unusable)
    except RunFailed as error:  # stored all the same: show it, then say why it failed
        run_id, failure = error.run_id, error
    on_hard_stop.clear()  # the run is recorded as ended: nothing to say "stored" of, or mark
    if stopping.asked():  # a signal a library swallowed (asyncio's transport took Prefect's
        said_to_have_ended(f"run {run_id}", f"numerate report --run {run_id}")  # exit 0 was)
    try:
        settle_prefect()
        print_report(Store.open(db_path), run_id, fmt)
    except NumerateError as error:  # the run is stored: only its report could not be read
        fail(error)
    except KeyboardInterrupt:  # a bare `terminated` for a run stored as ended
        say_once("")(f"run {run_id} is stored; numerate report --run {run_id} shows it")
        quiet_exit(stop_code())
    Store.close_all()
    if failure is not None:
        fail(f"run {run_id}: {failure}", EXIT_RUN_FAILED)


def prepare(
    options: tuple[Any, ...], db: str | None, fresh: bool, output: str
) -> tuple[SweepConfig, Format, str, Server, dict[str, str]]:
    """Everything checked before the flow runs: the sweep (`sweep_to_run(*options)`), the
    format, then the run's preflight (numerate.preflight: results location, concurrency
    limits, endpoints, database, the run to resume). Returns the sweep, the format, the
    database, the Prefect server being started and the unusable models; leaves with one error
    line when anything is wrong."""
    from numerate.cli.server import connect, mode

    servers: list[Server] = []  # the one being started, once it is
    try:
        if mode() == "background":  # first: its start goes on while the sweep is read
            servers.append(connect())
        sweep_config, fmt, db_path, checked = check_sweep(options, db, fresh, output, servers)
    except NumerateError as error:
        from numerate.verdict import EXIT_RUN_FAILED, RunFailed

        for server in servers:
            server.abandon()  # a server started for a run that does not run: stopped
        fail(error, EXIT_RUN_FAILED if isinstance(error, RunFailed) else 2)
    except KeyboardInterrupt:
        for server in servers:
            server.abandon()
        raise
    return sweep_config, fmt, db_path, servers[0], checked.unusable


def check_sweep(
    options: tuple[Any, ...], db: str | None, fresh: bool, output: str, servers: list[Server]
) -> tuple[SweepConfig, Format, str, Preflight]:
    """`prepare`'s checks, in order; a Prefect server is connected to (`servers`) once the
    sweep is known to be readable, when none is being started yet."""
    import asyncio

    from numerate.cli.server import connect
    from numerate.config import results_database
    from numerate.preflight import preflight

    sweep_config = sweep_to_run(*options)
    fmt = check_format(output)
    db_path = results_database(db, sweep_config.db)
    starting = announce_start(db_path)  # readers meanwhile hear that a run is starting
    try:
        if not servers:  # Prefect's temporary server, or PREFECT_API_URL's
            servers.append(connect())
        ready = servers[0].wait
        checked = asyncio.run(preflight(sweep_config, db_path, fresh, starting, ready))
        say_what_preflight_found(sweep_config, checked)  # RunFailed when nothing can run
    except BaseException:
        if starting is not None:
            starting.close()
        raise
    return sweep_config, fmt, db_path, checked


def announce_start(db_path: str) -> Any:
    """A journal for the run, taken before anything else, so that a reader of the database
    hears "a run is starting" rather than "no results database"; None where the database's
    folder cannot be written, or what lies at its path is no database (a folder, a text file):
    the store says why when it opens, and nothing was made beside it."""
    from numerate.store.journal import Journal
    from numerate.store.reader import database_file_problem

    try:  # a name too long for the file system, too: the store says so
        return None if database_file_problem(db_path) else Journal(db_path)
    except OSError:
        return None


def sweep_to_run(
    config: Path | None,
    model: str | None,
    base_url: str | None,
    name: str | None,
    api_key_env: str | None = None,
) -> SweepConfig:
    """The sweep the options ask for: a config file or the built-in sweep, optionally
    narrowed to one model."""
    from numerate.config import (
        DEFAULT_SWEEP,
        load_sweep_config,
        one_model_config,
        parse_sweep_config,
    )

    sweep_config = (
        load_sweep_config(config) if config else parse_sweep_config(DEFAULT_SWEEP, "built-in sweep")
    )
    if model is not None and not model.strip():
        raise ConfigError(f"--model {model!r}: give a model id (or a baseline:NAME)")
    if name is not None and not name.strip():  # it was replaced by the model id, silently
        raise ConfigError(f"--name {name!r}: give a label, or leave it out (the model id)")
    if model:
        return one_model_config(sweep_config, model, base_url, name, api_key_env)
    given = [o for o, v in (("--base-url", base_url), ("--api-key-env", api_key_env),
                            ("--name", name)) if v is not None]  # fmt: skip
    if given:
        raise ConfigError(f"{given[0]} needs --model (it describes the model --model names)")
    return sweep_config


def say_what_preflight_found(sweep_config: SweepConfig, checked: Preflight) -> None:
    """A model id an endpoint does not list is a warning; so is a dead endpoint or a refused
    key while other models can run (that model's part fails, the others go on); when no model
    can run, RunFailed says why, before anything is written. One line when the run resumes an
    unfinished run of the same sweep and config."""
    from numerate.verdict import RunFailed

    nothing = checked.nothing_can_run(sweep_config)
    if nothing is not None:
        raise RunFailed(nothing, run_id="")
    failures = list(checked.unusable.values())
    for warning in checked.warnings + [f"{f} (its part of the run will fail)" for f in failures]:
        typer.echo(f"warning: {warning}", err=True)
    if checked.resuming:
        typer.echo(
            f"resuming run {checked.resuming}: {checked.answered:,} answers already stored are "
            "not asked again (--fresh starts a new run)",
            err=True,
        )


def import_what_the_flow_uses() -> None:
    """The modules a sweep's flow imports on first use, imported while Prefect's server is
    still starting (a first run: 0.5 s less after the server answers). Not otherwise: a fully
    cached re-run never imports the OpenAI client. (What a run imports late, Prefect's and
    polars' lazy imports included: `python -X importtime -m numerate.cli run`.)"""
    import fastapi.encoders  # noqa: F401
    import openai  # noqa: F401
    import prefect.flow_engine
    import prefect.task_engine
    import prefect.telemetry.run_telemetry
    import prefect.utilities.visualization  # noqa: F401
    import pyarrow  # noqa: F401

    import numerate.aggregate  # noqa: F401


def _record_the_stop(
    sweep_config: SweepConfig, db_path: str, started: datetime, seconds: float
) -> str | None:
    """Mark the sweep's run interrupted, within `seconds`; what to say instead of "run the
    same command again to resume": that a run of it ended since `started` (the command's
    start), when the signal came as it ended (it stopped nothing of it), or that nothing was
    stored, when it came before the run began (the database made for it is removed; one that
    was there is said to hold nothing of it: "every answer ... is stored" was said of none)."""
    from numerate.cli.common import ended_as_the_signal_came
    from numerate.store import Store, StoreError, access

    access.hurry(seconds)  # within the 5 s every command stops in (common.stop_within)
    said = None
    with contextlib.suppress(StoreError):  # busy: the run stays 'running', resumable
        store = Store.open(db_path)
        store.mark_interrupted()
        ended = store.ended_since(sweep_config.name, sweep_config.fingerprint(), started)
        if ended:
            said = ended_as_the_signal_came(f"run {ended}", f"numerate report --run {ended}")
        elif store.discard_if_unused():
            said = f"{NOT_STARTED}, and {db_path} was not made"
        elif not store.claimed_runs():  # the flow had not begun (or resumed) a run of it
            said = NOT_STARTED
    Store.close_all()  # what cannot be written now stays in the journal
    return said


def run_sweep(
    sweep_config: SweepConfig,
    db_path: str,
    fresh: bool,
    server: Server,
    unusable: dict[str, str],
) -> str:
    """Run the sweep flow with a progress bar; returns the run id. Ctrl-C stops it cleanly.
    The endpoints were just checked (`unusable`), and `numerate plot` draws the plot when
    wanted: the flow does neither again (about 0.7 s)."""
    import asyncio
    import logging

    from prefect import tags

    from numerate.flows.sweep import run_tags, sweep

    quiet_run_logs(logging.CRITICAL)  # how the run ended is said once, by the CLI
    from numerate.progress import reporting_to
    from numerate.store import StoreError
    from numerate.verdict import RunFailed

    cases = sweep_config.total_cases()
    typer.echo(
        f"sweep {sweep_config.name!r}: {len(sweep_config.models)} model(s) x {cases:,} cases "
        f"-> {db_path}",
        err=True,
    )
    import signal

    from prefect.exceptions import TerminationSignal

    from numerate.store.schema import now

    record_the_stop = functools.partial(_record_the_stop, sweep_config, db_path, now())
    said = say_once("every answer received so far is stored; run the same command again to resume")
    # stopped past the deadline (one long call in C): the run is still recorded as stopped
    on_hard_stop.extend([said, lambda: record_the_stop(1)])
    try:
        server.wait(meanwhile=import_what_the_flow_uses)
        with reporting_to(terminal_progress(sweep_config.name)), tags(*run_tags(sweep_config)):
            # a Failed run raises RunFailed here
            return str(asyncio.run(sweep(sweep_config, db_path, fresh, unusable, plot=False)))
    except (KeyboardInterrupt, TerminationSignal) as stop:
        instead = record_the_stop(3)
        if isinstance(stop, TerminationSignal) and not stop_signals:  # Prefect's own handler
            stop_signals.append(signal.SIGTERM)
        said(instead)  # "run the same command again to resume" resumed an older run
        quiet_exit(stop_code())
    except RunFailed:
        raise  # stored all the same: the caller reports it
    except NumerateError as error:
        fail(error, 3 if isinstance(error, StoreError) else 2)
