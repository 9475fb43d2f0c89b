"""The `numerate` command line.

Imports stay inside the commands: `numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from numerate.errors import ConfigError, NumerateError

app = typer.Typer(
    name="numerate",
    help="Evaluate language models on reasoning test manifolds and text-to-image models on NumGen.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 2) -> None:
    """Print an error for the user and leave with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """`key=value` pairs; values are read as JSON where they parse ("8", "0.5", "true",
    "\\"\\\\n\\""), else as plain strings ("ROMAN")."""
    values: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {assignment!r}")
        try:
            values[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            values[key.strip()] = raw
    return values


@app.command()
def generate(
    manifold: Annotated[str, typer.Argument(help="Manifold name: objects, shuffle or sequence.")],
    count: Annotated[int, typer.Option(help="Cases to generate.")] = 10,
    seed: Annotated[int, typer.Option(help="Base seed of the grid point.")] = 42,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Generation parameter, key=value (repeatable)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="JSON Lines file to write (default: standard output).")
    ] = None,
) -> None:
    """Generate test cases as JSON Lines, one case a line."""
    from pydantic import ValidationError

    from manifolds import registry
    from numerate.errors import describe_validation_error

    try:
        spec = registry.get(manifold)
        values = parse_assignments(set_ or [])
        values["count"] = count
        unknown = sorted(set(values) - set(spec.params_model.model_fields))
        if unknown:
            known = ", ".join(spec.params_model.model_fields)
            raise ConfigError(f"{manifold} has no parameter {unknown[0]!r} (parameters: {known})")
        try:
            params = spec.params(**values)
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, f"{manifold} parameters")) from None
    except (NumerateError, registry.UnknownManifoldError) as error:
        fail(str(error))
        return

    cases = spec.cases(params, seed)
    if out is None:
        for case in cases:
            sys.stdout.write(case.model_dump_json() + "\n")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for case in cases:
            handle.write(case.model_dump_json() + "\n")
    partial.replace(out)  # a reader never sees half a file
    typer.echo(f"wrote {count} {manifold} cases to {out}", err=True)


@app.command()
def manifolds() -> None:
    """List the manifolds, their parameters, defaults and bounds."""
    from manifolds import registry

    for name in registry.names():
        spec = registry.get(name)
        typer.echo(f"{name}: {spec.description}")
        for field, info in spec.params_model.model_fields.items():
            bounds = " ".join(
                f"{k}={getattr(m, k)}"
                for m in info.metadata
                for k in ("gt", "ge", "lt", "le")
                if getattr(m, k, None) is not None
            )
            default = info.default.value if hasattr(info.default, "value") else info.default
            doc = (info.description or "").strip()
            typer.echo(f"  {field:<18} default={default!r:<8} {bounds:<14} {doc}")


def _terminal_progress(description: str) -> Any:
    """A rich progress bar on standard error (rich is imported only when a sweep runs)."""
    from rich.console import Console
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as RichBar

    from numerate.progress import Progress

    class TerminalProgress(Progress):
        def __init__(self) -> None:
            super().__init__()
            self.bar = RichBar(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,}"),
                TextColumn("{task.fields[rate]:,.0f}/s"),
                TextColumn("{task.fields[errors]:,} errors"),
                TextColumn("{task.fields[cached]:,} cached"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self.task_id = self.bar.add_task(description, total=0, rate=0.0, errors=0, cached=0)
            self.bar.start()

        def render(self) -> None:
            self.bar.update(
                self.task_id, total=self.total, completed=self.done, rate=self.rate(),
                errors=self.errors, cached=self.cached,
            )  # fmt: skip

        def close(self) -> None:
            self.render()
            self.bar.stop()

    return TerminalProgress()


def _settle_prefect() -> None:
    """Let a temporary Prefect server record the last task runs before the process exits.

    Without a PREFECT_API_URL, Prefect runs a server inside this process; exiting while it
    writes the last task-run events cancels those writes (lost history, tracebacks on exit).
    """
    import os
    import time

    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=5)
    time.sleep(1.0)


@app.command()
def run(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Sweep config (YAML). Default: the built-in sweep."),
    ] = None,
    db: Annotated[
        str | None, typer.Option(help="DuckDB results file (overrides the config).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Evaluate only this model id (with --base-url).")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Endpoint for --model, e.g. http://127.0.0.1:8000/v1.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Label for --model in the results.")] = None,
    fresh: Annotated[
        bool, typer.Option(help="Start a new run instead of resuming an unfinished one.")
    ] = False,
    output: Annotated[
        str, typer.Option("--format", help="Report format: table, csv, json or markdown.")
    ] = "table",
) -> None:
    """Run a sweep: generate, query, grade, aggregate, store; then print the results."""
    import asyncio
    import os

    from numerate.config import (
        DEFAULT_SWEEP,
        load_sweep_config,
        one_model_config,
        parse_sweep_config,
    )

    try:
        sweep_config = (
            load_sweep_config(config)
            if config
            else parse_sweep_config(DEFAULT_SWEEP, "built-in sweep")
        )
        if model:
            sweep_config = one_model_config(sweep_config, model, base_url, name)
        elif base_url:
            raise ConfigError("--base-url needs --model")
        _check_format(output)
        from numerate.querying import check_endpoint

        async def check_all() -> list[str]:
            return [w for m in sweep_config.models if (w := await check_endpoint(m))]

        for warning in asyncio.run(check_all()):
            typer.echo(f"warning: {warning}", err=True)
    except NumerateError as error:
        fail(str(error))
        return

    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")  # keep the progress bar readable
    from flows.sweep import DEFAULT_DB, sweep
    from numerate.progress import reporting_to
    from numerate.store import Store

    db_path = db or sweep_config.db or DEFAULT_DB
    config_data = sweep_config.model_dump(mode="json")
    cases = sweep_config.total_cases()
    typer.echo(
        f"sweep {sweep_config.name!r}: {len(sweep_config.models)} model(s) x {cases:,} cases "
        f"-> {db_path}",
        err=True,
    )
    try:
        with reporting_to(_terminal_progress(sweep_config.name)):
            run_id = asyncio.run(sweep(config_data, db_path, fresh))
    except KeyboardInterrupt:
        Store.open(db_path).mark_interrupted(sweep_config.name, sweep_config.fingerprint())
        Store.close_all()
        typer.echo(
            "interrupted: every answer received so far is stored; run the same command again "
            "to resume",
            err=True,
        )
        raise typer.Exit(130) from None
    except NumerateError as error:
        fail(str(error))
        return
    _settle_prefect()
    _print_report(Store.open(db_path), run_id, output)
    Store.close_all()


def _check_format(output: str) -> None:
    if output not in ("table", "csv", "json", "markdown"):
        raise ConfigError(f"--format {output!r}: choose table, csv, json or markdown")


def _print_report(store: Any, run_id: str, output: str) -> None:
    from numerate.report import render, run_summaries

    frame = run_summaries(store, run_id)
    typer.echo(render(frame, output, title=f"run {run_id}"), nl=False)  # type: ignore[arg-type]


@app.command()
def report(
    db: Annotated[str, typer.Option(help="DuckDB results file.")] = "results/numerate.duckdb",
    run_id: Annotated[
        str | None, typer.Option("--run", help="Run id (default: the latest run).")
    ] = None,
    output: Annotated[
        str, typer.Option("--format", help="table, csv, json or markdown.")
    ] = "table",
    points: Annotated[bool, typer.Option(help="Also show every grid point.")] = False,
) -> None:
    """Show a run's results: per model and per manifold, with 95% intervals."""
    from numerate.report import latest_run, render
    from numerate.store import Store

    try:
        _check_format(output)
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db} (run `numerate run` first)")
        store = Store.open(db)
        run_id = run_id or latest_run(store)
        if run_id is None:
            raise ConfigError(f"{db} holds no runs yet")
        if not store.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
            raise ConfigError(f"{db} has no run {run_id!r}")
    except NumerateError as error:
        fail(str(error))
        return
    _print_report(store, run_id, output)
    if points:
        frame = store.frame(
            "SELECT model, manifold, point_key, n, accuracy, ci_low, ci_high, chance_adjusted, "
            "unparsed_rate, truncation_rate, error_rate FROM points WHERE run_id = ? "
            "ORDER BY model, manifold, point_key",
            [run_id],
        )
        typer.echo(render(frame, output, title="grid points"), nl=False)  # type: ignore[arg-type]


@app.command()
def grade(
    path: Annotated[Path, typer.Argument(help="JSON Lines: cases with a `response` field.")],
    out: Annotated[
        Path | None, typer.Option(help="File to write (default: standard output).")
    ] = None,
) -> None:
    """Grade answers from any source: each line is a case as `numerate generate` writes it plus
    `response` (and optionally `finish_reason`); each is written back with `outcome` and
    `answer`."""
    from numerate.regrade import grade_lines

    try:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not UTF-8 text") from None
        except OSError as error:
            raise ConfigError(f"cannot read {path}: {error.strerror}") from None
        graded = grade_lines(text.splitlines(), str(path))
    except NumerateError as error:
        fail(str(error))
        return
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in graded)
    if out is None:
        sys.stdout.write(lines)
        return
    _write_atomically(out, lines)
    counts = Counter(r["outcome"] for r in graded)
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    typer.echo(f"graded {len(graded)} answers ({summary or 'none'}) -> {out}", err=True)


def _write_atomically(out: Path, text: str) -> None:
    """Write `out` so that a reader never sees half a file."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(out)
    except OSError as error:
        fail(f"cannot write {out}: {error.strerror}")


@app.command()
def regrade(
    run_id: Annotated[str, typer.Option("--run", help="The run to grade again.")],
    db: Annotated[str, typer.Option(help="DuckDB results file.")] = "results/numerate.duckdb",
) -> None:
    """Grade a stored run's answers again with the current graders (the answers stay; their
    outcomes and the run's aggregates are updated)."""
    from numerate.regrade import regrade_run
    from numerate.store import Store

    try:
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db}")
        store = Store.open(db)
        if not store.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
            raise ConfigError(f"{db} has no run {run_id!r}")
        changes = regrade_run(store, run_id)
    except NumerateError as error:
        fail(str(error))
        return
    total = sum(changes.values())
    moved = {k: n for k, n in changes.items() if k[0] != k[1]}
    detail = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in sorted(moved.items()))
    typer.echo(
        f"regraded {total} responses of {run_id}: {sum(moved.values())} outcome(s) changed"
        + (f" ({detail})" if detail else "")
    )


cache_app = typer.Typer(help="The stored answers that cache policy `reuse` and resumed runs read.",
                        no_args_is_help=True)  # fmt: skip
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def cache_clear(
    db: Annotated[str, typer.Option(help="DuckDB results file.")] = "results/numerate.duckdb",
    model: Annotated[
        str | None, typer.Option(help="Only answers of this endpoint model id.")
    ] = None,
    before: Annotated[
        str | None, typer.Option(help="Only answers stored before this date (YYYY-MM-DD).")
    ] = None,
) -> None:
    """Remove stored answers, so that no later run can reuse them (graded responses keep
    their text: no result is lost)."""
    from datetime import UTC, datetime

    from numerate.store import Store

    try:
        when = None
        if before is not None:
            try:
                when = datetime.fromisoformat(before)
            except ValueError:
                raise ConfigError(f"--before {before!r}: expected a date, YYYY-MM-DD") from None
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db}")
        removed = Store.open(db).clear_completions(model, when)
    except NumerateError as error:
        fail(str(error))
        return
    typer.echo(f"removed {removed} stored answer(s) from {db}")


@app.command("db")
def db_command(
    path: Annotated[str, typer.Argument(help="DuckDB results file.")] = "results/numerate.duckdb",
    sql: Annotated[
        str | None, typer.Argument(help="SQL to run (default: list the tables).")
    ] = None,
    output: Annotated[
        str, typer.Option("--format", help="table, csv, json or markdown.")
    ] = "table",
) -> None:
    """Query the results with SQL (read-only); without SQL, list the tables and views."""
    import duckdb

    from numerate.report import render

    try:
        _check_format(output)
        if not Path(path).exists():
            raise ConfigError(f"no results database at {path}")
        con = duckdb.connect(path, read_only=True)
    except NumerateError as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot open {path}: {error}")
        return
    query = sql or (
        "SELECT table_name AS name, table_type AS kind FROM information_schema.tables "
        "ORDER BY table_type, table_name"
    )
    try:
        frame = con.sql(query).pl()  # duckdb 2.0: only relations have .pl()
    except duckdb.Error as error:
        fail(str(error).splitlines()[0])
        return
    finally:
        con.close()
    typer.echo(render(frame, output), nl=False)  # type: ignore[arg-type]


@app.command()
def ingest(
    results_dir: Annotated[str, typer.Argument(help="Results location (folder or fsspec URL).")],
    db: Annotated[str, typer.Option(help="DuckDB file to load into.")] = "results/numerate.duckdb",
) -> None:
    """Load the Parquet shards of runs made on other workers (complete, not yet loaded)."""
    from numerate import shards
    from numerate.store import Store

    try:
        shards.complete_runs(results_dir)  # a missing location fails before the database opens
        loaded = shards.ingest(Store.open(db), results_dir)
    except NumerateError as error:
        fail(str(error))
        return
    typer.echo(f"ingested {len(loaded)} run(s) into {db}" + "".join(f"\n  {r}" for r in loaded))


@app.command()
def deploy(
    cron: Annotated[str, typer.Option(help="When the nightly sweep runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of the cron schedule.")] = "UTC",
) -> None:
    """Create the work pools `cpu` and `gpu` and deploy numerate's flows (nightly-sweep,
    evaluate) to the Prefect server at PREFECT_API_URL."""
    import os
    import subprocess

    root = Path(__file__).resolve().parent.parent
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
        fail(str(error))
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


def _add_numgen() -> None:
    from numerate.numgen_cli import app as numgen_app

    app.add_typer(numgen_app, name="numgen")


_add_numgen()


def main() -> None:  # pragma: no cover - entry point
    """The console script: the app, then close any results database it opened."""
    try:
        app()
    finally:
        store = sys.modules.get("numerate.store")
        if store is not None:
            store.Store.close_all()


if __name__ == "__main__":  # pragma: no cover
    main()
