"""`numerate regrade`: grade a stored run's answers again with the current graders."""

from __future__ import annotations

from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import DB_OPTION, RUN_HELP, fail, results_db, terminal_progress
from numerate.kernel.errors import NumerateError, for_terminal


@app.command()
def regrade(
    run_id: Annotated[str, typer.Option("--run", help=f"The run to grade again. {RUN_HELP}")],
    db: Annotated[str | None, DB_OPTION] = None,
) -> None:
    """Grade a stored run's answers again with the current graders.

    The answers stay as received; their outcomes and the run's aggregates are updated.
    """
    from numerate.cli.process import PROCESS

    PROCESS.if_stopped_say(  # a page's grades are stored as it is graded
        "the answers graded again so far are stored; run the same command again to grade the rest"
    )
    from numerate.kernel.progress import reporting_to
    from numerate.results.regrade import regrade_run
    from numerate.results.runs import resolve_run
    from numerate.store import Store, existing_database
    from numerate.store.queries import answers_in

    db = results_db(db)
    try:
        existing_database(db)
        store = Store.open(db)
        run_id = resolve_run(store, run_id)  # latest, previous, or a unique prefix, as elsewhere
        if not answers_in(store, run_id):  # "regraded 0 responses", exit 0: as `report` says
            fail(f"run {run_id} holds no answer: nothing to regrade")
        if not store.claim_run(run_id):  # held while it is graded again: none resumes it
            fail(
                f"run {run_id} is still running (another process writes it): regrade it once "
                "it has ended"
            )  # fmt: skip  (its progress went past its total, 47,648/42,000)
        with reporting_to(terminal_progress("regrade", asks=False)):
            changes = regrade_run(store, run_id)
    except NumerateError as error:
        fail(error)
        return
    total = sum(changes.values())
    moved = {k: n for k, n in changes.items() if k[0] != k[1]}
    detail = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in sorted(moved.items()))
    typer.echo(for_terminal(  # an outcome changed by hand may hold anything
        f"regraded {total} responses of {run_id}: {sum(moved.values())} outcome(s) changed"
        + (f" ({detail})" if detail else "")
    ))  # fmt: skip
