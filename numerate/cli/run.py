"""`numerate run`: a sweep from the command line, with a progress bar and its report."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from numerate.cli.app import app
from numerate.cli.common import Format, check_format, fail, path_option, print_report, warn
from numerate.cli.process import PROCESS
from numerate.cli.running import RunKind, run_flow, shown_after_a_signal
from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, ConfigError, NumerateError

if TYPE_CHECKING:
    from numerate.config.sweep import SweepConfig
    from numerate.endpoints.preflight import Preflight
    from numerate.server.lifecycle import Server


SWEEP = RunKind(
    name="run",
    report="numerate report --run {run_id}",
    kept="every answer received so far is stored; run the same command again to resume",
    not_started="the run had not started; nothing was stored",
)


@app.command()
def run(
    config: Annotated[
        Path | None,
        path_option("Sweep config (YAML). Default: the built-in sweep.", "--config", "-c"),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            help="Results database: a DuckDB file, or a lake 'ducklake:postgres:<connection "
            "string>' (overrides the config; default: $NUMERATE_DB, else results/numerate.duckdb)."
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
    PROCESS.if_stopped_say(SWEEP.not_started)
    sweep_config, fmt, db_path, server, unusable = prepare(
        (config, model, base_url, name, api_key_env), db, fresh, output
    )  # first: it starts Prefect's server when none runs; a stop until its flow begins (the
    # flow's imports) leaves the run not started, run_flow says how it stopped from there
    from numerate.grading.verdict import RunFailed
    from numerate.store import Store, StoreError

    failure = None
    try:
        run_id = run_sweep(sweep_config, db_path, fresh, server, unusable)
    except RunFailed as error:  # stored all the same: show it, then say why it failed
        run_id, failure = error.run_id, error
    except NumerateError as error:
        fail(error, EXIT_FAILED_FOR_NOW if isinstance(error, StoreError) else None)
    with shown_after_a_signal(SWEEP, run_id):
        try:
            print_report(Store.open(db_path), run_id, fmt)
        except NumerateError as error:  # the run is stored: only its report could not be read
            fail(error)
    Store.close_all()
    if failure is not None:
        fail(f"run {run_id}: {failure}", failure.exit_code)


def prepare(
    options: tuple[Any, ...], db: str | None, fresh: bool, output: str
) -> tuple[SweepConfig, Format, str, Server, dict[str, str]]:
    """Everything checked before the flow runs: the sweep (`sweep_to_run(*options)`), the
    format, then the run's preflight (numerate.endpoints.preflight: results location, concurrency
    limits, endpoints, database, the run to resume). Returns the sweep, the format, the
    database, the Prefect server being started and the unusable models; leaves with one error
    line when anything is wrong."""
    from numerate.server.lifecycle import connect, mode

    servers: list[Server] = []  # the one being started, once it is
    try:
        if mode() == "background":  # first: its start goes on while the sweep is read
            servers.append(connect())
        sweep_config, fmt, db_path, checked = check_sweep(options, db, fresh, output, servers)
    except NumerateError as error:  # RunFailed (no model can run): exit 3
        for server in servers:
            server.abandon()  # a server started for a run that does not run: stopped
        fail(error)
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
    from numerate.config.sweep import results_database
    from numerate.endpoints.preflight import preflight
    from numerate.server.lifecycle import connect

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
    folder cannot be written, or what lies at its path is no database (a folder, a text file)
    or a file cut short: the store says why when it opens, and nothing was made beside it."""
    from numerate.store.journal import Journal
    from numerate.store.reader import database_file_problem, shorter_than_its_header_says

    try:  # a name too long for the file system, too: the store says so
        refused = database_file_problem(db_path, writing=True) or shorter_than_its_header_says(
            db_path
        )
        return None if refused else Journal(db_path)
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
    from numerate.config.sweep import (
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
    from numerate.grading.verdict import RunFailed

    nothing = checked.nothing_can_run(sweep_config)
    if nothing is not None:
        raise RunFailed(nothing, run_id="")
    failures = list(checked.unusable.values())
    for warning in checked.warnings + [f"{f} (its part of the run will fail)" for f in failures]:
        warn(warning)
    if checked.resuming:
        kept = (
            f"{checked.answered:,} answer{'' if checked.answered == 1 else 's'} already stored "
            f"{'is' if checked.answered == 1 else 'are'} not asked again"
            if checked.answered
            else "no answer it stored stands in for a request"
        )
        typer.echo(
            f"resuming run {checked.resuming}: {kept} (errors are asked again; --fresh starts "
            "a new run)",
            err=True,
        )


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
    from prefect import tags

    from numerate.flows.sweep import import_what_it_uses, run_tags, sweep

    cases = sweep_config.total_cases()
    typer.echo(
        f"sweep {sweep_config.name!r}: {len(sweep_config.models)} model(s) x {cases:,} cases "
        f"-> {db_path}",
        err=True,
    )
    fingerprint = sweep_config.fingerprint()
    return run_flow(
        SWEEP, db_path, sweep_config.name,
        flow=lambda: sweep(sweep_config, db_path, fresh, unusable, plot=False),
        ended_since=lambda store, since: store.ended_since(sweep_config.name, fingerprint, since),
        before=lambda: server.wait(meanwhile=import_what_it_uses),
        context=tags(*run_tags(sweep_config)),
    )  # fmt: skip
