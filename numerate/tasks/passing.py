"""Passing big arguments to tasks, and big results back, cheaply."""

from typing import TypeVar, cast

from prefect.utilities.annotations import quote

T = TypeVar("T")


def unwalked(value: T) -> T:
    """`value` for a task argument that Prefect passes as it is, without walking every item
    looking for futures (which cost 40 s on a 10,000-case sweep); typed as the value itself."""
    return cast(T, quote(value))


def returned_whole(value: T) -> quote:
    """`value` for a task to return, wrapped so that Prefect keeps track of it as two objects
    (the wrapper and the value), not an object per item (the caller takes it back with
    `.unquote()`; typed bare: mypy reads Prefect's `quote` as not generic). Prefect links a
    task's result, and every item one level into it, to the task run's state for the rest of
    the flow run (`FlowRunContext.run_results`): the sweep's batches of graded rows left an
    entry per answer, about 150 bytes each, so that a 1,000,000-case sweep's memory grew by
    about 130 MB as it went (docs/benchmarks.md, "Row groups of 8,192 rows, and answers
    Prefect kept (2026-11-28)"). For a task awaited in this process only: `quote` is a tuple,
    and one pickled (a persisted result, a task sent to another process) comes back as a
    1-tuple around the value."""
    return quote(value)
