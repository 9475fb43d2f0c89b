"""`numerate compare`: two runs, paired case by case (McNemar, Holm), per model and manifold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_OPTION,
    FORMAT_OPTION,
    RUN_HELP,
    check_format,
    fail,
    note,
    open_reader,
    show,
)
from numerate.kernel.errors import ConfigError, NumerateError

if TYPE_CHECKING:
    import polars as pl

    from numerate.cli.common import Format
    from numerate.store.reader import Reader


def an_alpha(text: str) -> float:
    """The parser of `--alpha`: a number strictly between 0 and 1, shown as given when it is
    not one (`1e-400` is 0.0 to a float: it is said so, not shown as 0.0)."""
    try:
        value = float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give a number between 0 and 1") from None
    if not 0.0 < value < 1.0:
        why = " (too small to tell from 0)" if value == 0.0 and text.strip("+-0.eE ") else ""
        raise typer.BadParameter(f"{text}: need 0 < alpha < 1{why}")
    return value


ALPHA_OPTION = typer.Option(
    help="Family-wise error rate of the verdicts (0 < alpha < 1).",
    parser=an_alpha,
)


@app.command()
def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help=f"The reference run. {RUN_HELP}")],
    new: Annotated[str, typer.Argument(metavar="NEW", help=f"The run under test. {RUN_HELP}")],
    db: Annotated[str | None, DB_OPTION] = None,
    by: Annotated[
        str,
        typer.Option(help="Groups: model x manifold, or model x grid point: manifold or point."),
    ] = "manifold",
    model: Annotated[
        list[str] | None, typer.Option(help="Only this model (repeat for several).")
    ] = None,
    base_model: Annotated[
        str | None, typer.Option(help="Pair this model of BASE with --new-model of NEW.")
    ] = None,
    new_model: Annotated[
        str | None, typer.Option(help="Pair this model of NEW with --base-model of BASE.")
    ] = None,
    manifold: Annotated[
        list[str] | None, typer.Option(help="Only this manifold (repeat for several).")
    ] = None,
    sweep: Annotated[
        str | None, typer.Option(help="Resolve latest and previous within this sweep.")
    ] = None,
    alpha: Annotated[float, ALPHA_OPTION] = 0.05,
    output: Annotated[str, FORMAT_OPTION] = "table",
    fail_on_regression: Annotated[
        bool, typer.Option(help="Exit with code 4 when any group is a regression.")
    ] = False,
) -> None:
    """Compare two runs' accuracy on the cases both answered, pair by pair.

    By default each model is compared with itself: did model X get worse from BASE to NEW
    (`numerate compare previous latest`)? To compare two models, name them with
    --base-model and --new-model (BASE and NEW may be the same run); when each run holds
    exactly one model, under different names, those two are paired.

    Each group gets both accuracies with 95% intervals, the paired difference with its 95%
    interval (grid points weigh the same), the exact McNemar test, a verdict (regression,
    improvement or no change) at --alpha after Holm's adjustment over the groups with a
    discordant pair, and the smallest drop it would catch with 80% probability. Unparsed
    and truncated answers count as wrong; pairs with an error on either side are left out
    and counted.

    Exit codes: 0; 2 for bad input (unknown run, no shared cases); 4 with
    --fail-on-regression when any group regressed, so a nightly job can gate on
    `numerate compare previous latest --sweep nightly --fail-on-regression`.
    """
    from numerate.results.pairing import check_grouping, compare_pair, load_pair

    try:
        fmt = check_format(output)
        grouping = check_grouping(by)
        with open_reader(db) as reader:
            runs = _resolve_pair(reader, base, new, sweep, (base_model, new_model))
            models = (base_model, new_model)
            counts = load_pair(reader, runs, model or [], models, manifold or [], note)
        comparison = compare_pair(counts, by=grouping, alpha=alpha, runs=runs)
    except NumerateError as error:
        fail(error)
    _report(comparison, fmt, f"{runs[0]} -> {runs[1]}", fail_on_regression, alpha)


def _report(comparison: pl.DataFrame, fmt: Format, title: str, gate: bool, alpha: float) -> None:
    """The comparison, its one-line summary and what it could see (on stderr after CSV or
    JSON); with `gate`, the regressions named on stderr and exit code 4 when there is any."""
    from numerate.results.compare import (
        EXIT_REGRESSION,
        any_regression,
        detectable_line,
        for_display,
        summary_line,
    )
    from numerate.results.report import render

    shown = for_display(comparison) if fmt in ("table", "markdown") else comparison
    show(render(shown, fmt, title=title))
    if fmt == "markdown":  # a paragraph of its own: a line right under a table is a row of it
        typer.echo()
    typer.echo(summary_line(comparison), err=fmt in ("csv", "json"))
    typer.echo(detectable_line(comparison, alpha), err=fmt in ("csv", "json"))
    if gate and any_regression(comparison):
        regressed = comparison.filter(comparison["verdict"] == "regression")
        keys = [k for k in ("model", "manifold", "point_key") if k in regressed.columns]
        names = ", ".join("/".join(row) for row in regressed.select(keys).iter_rows())
        typer.echo(f"regression: {names}", err=True)
        raise typer.Exit(EXIT_REGRESSION)


def _resolve_pair(
    reader: Reader, base: str, new: str, sweep: str | None, models: tuple[Any, Any]
) -> tuple[str, str]:
    """The two runs BASE and NEW name; ConfigError when they are one run and no two of its
    models are compared (--base-model, --new-model)."""
    from numerate.results.runs import check_sweep_name

    check_sweep_name(sweep)  # of both runs: said once, not as BASE's
    if sweep is not None:  # a typo, or one that changed nothing: said
        _check_sweep(reader, sweep, (base, new))
    runs = (_resolve(reader, base, sweep, "BASE"), _resolve(reader, new, sweep, "NEW"))
    if runs[0] == runs[1] and (None in models or models[0] == models[1]):
        raise ConfigError(
            f"BASE and NEW both name run {runs[0]}: nothing to compare (two of its models: "
            "--base-model and --new-model)"
        )
    return runs


def _check_sweep(reader: Reader, sweep: str, named: tuple[str, str]) -> None:
    """ConfigError for a --sweep the database holds no run of, or one that chooses nothing
    (BASE and NEW both run ids): it was ignored, and the comparison shown."""
    from numerate.results.runs import check_known_sweep

    check_known_sweep(reader, sweep)
    if all(text.strip() not in ("latest", "previous") for text in named):
        raise ConfigError(
            f"--sweep {sweep!r} chooses which runs latest and previous are; BASE and NEW are "
            "run ids (leave it out)"
        )


def _resolve(reader: Reader, text: str, sweep: str | None, role: str) -> str:
    """The run `text` names; a note on stderr when it has not finished."""
    from numerate.results.report import run_state
    from numerate.results.runs import resolve_run

    try:
        run_id = resolve_run(reader, text, sweep)
    except ConfigError as error:
        raise ConfigError(f"{role}: {error}") from None
    state = run_state(reader, run_id)
    if state:
        note(f"{role}: {state}")
    return run_id
