"""`numerate cache clear`: remove stored answers (the response cache)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import DB_OPTION, fail, results_db
from numerate.kernel.errors import ConfigError, NumerateError

cache_app = typer.Typer(
    help="The stored answers that cache policy `reuse` and resumed runs read.",
    no_args_is_help=True,
)


app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def cache_clear(
    db: Annotated[str | None, DB_OPTION] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(help="Only answers of this endpoint model id (repeatable)."),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option(
            help="Only answers stored before this date (YYYY-MM-DD), or time "
            "(YYYY-MM-DDTHH:MM, UTC unless it says its zone)."
        ),
    ] = None,
) -> None:
    """Remove stored answers, so that no later run can reuse them.

    Graded responses keep their text: no result is lost.
    """
    from numerate.store import Store, existing_database

    db = results_db(db)
    try:
        blank = next((m for m in model or [] if not m.strip()), None)
        if blank is not None:
            raise ConfigError(f"--model {blank!r}: give an endpoint model id, or leave it out "
                              "for all")  # fmt: skip
        when = None
        if before is not None:
            if not re.fullmatch(_A_TIME, before):  # fromisoformat reads 2026-W01, 20260101
                raise ConfigError(f"--before {before!r}: expected a date, YYYY-MM-DD, or a time, "
                                  "YYYY-MM-DDTHH:MM")  # fmt: skip
            zone = re.search(r"[+-]([0-9]{2}):([0-9]{2})$", before)
            if zone and (int(zone[1]) > 23 or int(zone[2]) > 59):  # Python said it as a timedelta
                raise ConfigError(f"--before {before!r}: the zone's offset {zone[0]} is out of "
                                  "range (from -23:59 to +23:59)")  # fmt: skip
            try:
                when = datetime.fromisoformat(before)
            except ValueError as error:  # of its shape, and none: the calendar's word
                raise ConfigError(f"--before {before!r}: {error}") from None
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
        existing_database(db)
        removed = Store.open(db).clear_completions(model or (), when)
    except NumerateError as error:
        fail(error)
        return
    typer.echo(f"removed {removed} stored answer(s) from {db}")


_A_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?"  # noqa: E501
"""What `--before` takes: a date, or a time to the minute (seconds allowed), with its zone
or none (UTC); `datetime.fromisoformat` alone took week dates and compact forms, on a
command that removes answers."""
