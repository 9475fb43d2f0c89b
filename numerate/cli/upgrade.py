"""`numerate upgrade`: bring a results database to this version's schema."""

from __future__ import annotations

from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import DB_OPTION, fail, results_db
from numerate.kernel.errors import NumerateError


@app.command()
def upgrade(db: Annotated[str | None, DB_OPTION] = None) -> None:
    """Bring a results database to this numerate's schema; every row is kept.

    Readers never write, so they ask for this. On a lake, also its maintenance: small files
    merged, old snapshots expired (docs/sharing.md, "A team's lake")."""
    from numerate.store import Store, existing_database
    from numerate.store.schema import SCHEMA_VERSION

    db = results_db(db)
    try:
        existing_database(db)
        store = Store.open(db)
        store.check_readable()
        maintained = store.maintain()
    except NumerateError as error:
        fail(error)
    found, views = store.found_version, store.views_made
    Store.close_all()
    if found == SCHEMA_VERSION:
        typer.echo(f"{db} already has schema version {SCHEMA_VERSION}")
    else:
        typer.echo(f"{db}: schema version {found} -> {SCHEMA_VERSION}, every row kept")
    if views:
        typer.echo(f"made again numerate's view(s) dropped by hand: {', '.join(views)}")
    if maintained:
        typer.echo("maintained: " + ", ".join(f"{what}: {n}" for what, n in maintained.items()))
