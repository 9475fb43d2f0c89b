"""What DuckDB tells only in words: its errors carry no code for these cases, so the match on
its messages lives here, in one place, and tests/store/test_duckdb_words.py pins each message
on the DuckDB that is installed (an upgrade that rewords one fails there, not in a user's run).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from numerate.kernel.errors import first_line

T = TypeVar("T")


def sql_literal(text: str) -> str:
    """`text` as a SQL string literal (quoted, its quotes doubled): for the statements that
    take no parameter (ATTACH, COPY ... TO, a table function's file name, SET)."""
    return "'" + text.replace("'", "''") + "'"


LISTED = "unnest(string_split(?, chr(31)))"
"""The strings of one parameter made by `listed`, as rows: `... IN (SELECT {LISTED})`."""


def listed(values: Sequence[str]) -> str:
    """Many strings (ids, hashes) as one parameter, for LISTED. DuckDB 1.5.5 binds a Python
    list of strings at about 70 µs an element (146 ms for a batch's 2,000 case ids, measured
    against 1.6 ms on 2.0.1: a sweep of 300,000 cases spent 45 s there); one string, split
    by DuckDB, takes the same few milliseconds on both. ValueError for no value (an empty
    string splits into one empty id) or one that holds the separator (chr(31))."""
    joined = "\x1f".join(values)
    if not values or joined.count("\x1f") != len(values) - 1:
        raise ValueError("listed: no value, or one holding the separator chr(31)")
    return joined


def is_lock_conflict(error: BaseException) -> bool:
    """Whether DuckDB refused to open a file because another process holds its lock."""
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


def is_damaged(error: BaseException) -> bool:
    """Whether a DuckDB error is about the file itself (unreadable, cut short, a block whose
    checksum does not match), not about the SQL."""
    import duckdb

    return isinstance(error, duckdb.IOException) or is_corrupt(error)


PARQUET_DAMAGE = (
    "too small to be a Parquet file", "No magic bytes found at end of file",
    "Invalid footer length",
)  # fmt: skip
"""DuckDB's words for a Parquet file cut short or overwritten: a lake's data file (its
catalog knows each file's footer: "Invalid footer length provided for file ..."), said as a
damaged database file is, not as a query's error."""


_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def unquoted(text: str) -> str:
    """An error's text without what it quotes ('a value', "a name", "a query"), each left as
    `''`: DuckDB's words for the file or the server are its own, never a value its error
    quotes (a stored answer: "Could not convert string 'Invalid footer length' to INT32")."""
    return _QUOTED.sub("''", text)


def is_corrupt(error: BaseException) -> bool:
    """Whether DuckDB found a block of the file damaged (its checksum does not match), or a
    lake's Parquet file cut short (PARQUET_DAMAGE): the file's fault, never a full disk's or a
    spill folder's, which `is_damaged` also covers, nor a value its error quotes."""
    text = unquoted(str(error))
    return "Corrupt database" in text or any(words in text for words in PARQUET_DAMAGE)


def out_of_memory(error: BaseException) -> str | None:
    """What DuckDB said of running out of its memory bound, in one line, or None when the
    error is not that: an "Out of Memory Error" line, however it comes (a fetch of a result
    says it in a second line; an OutOfMemoryException without one, its first line), or the
    cause a checkpoint gives when it could not pin or allocate a block ("CHECKPOINT during
    DETACH failed ... Original error: failed to pin block of size 256.0 KiB (30.5 MiB/30.5
    MiB used)": an IO Error whose cause is the bound, in the words DuckDB's "Out of Memory
    Error" uses after its name)."""
    import duckdb

    text = str(error)
    for line in text.splitlines():
        if "Out of Memory Error" in line:
            return line.removeprefix("Error: ")
    if isinstance(error, duckdb.OutOfMemoryException):
        return first_line(error)
    cause = file_fault(error)
    if cause.startswith(("failed to pin block", "could not allocate block")):
        return cause
    return None


def file_fault(error: BaseException) -> str:
    """What a DuckDB error about the file says, in one line: its first, or the cause it gives
    further down ("CHECKPOINT during DETACH failed ... Original error: Corrupt database file:
    computed checksum ..."), which is what the user can act on."""
    text = str(error)
    _, said, cause = text.partition("Original error: ")
    if said and cause.strip():
        return cause.strip().splitlines()[0]
    return text.splitlines()[0] if text else type(error).__name__


def is_commit_conflict(error: BaseException) -> bool:
    """Whether a DuckLake transaction failed to commit because another writer's commit came
    first (tried again, it sees that writer's rows)."""
    return "Failed to commit DuckLake transaction" in str(error)


JITTER = random.Random()
"""Where the store draws its pauses' jitter: a generator of its own. Drawing from the random
module's shared one changed what a program that seeded it drew next, depending on how often
another process held the database (Hypothesis warns when a test's strategy sees that)."""

COMMIT_TRIES = 8
"""Tries at a transaction in a lake. Two of its writers conflict when one deletes or updates
rows of a table (a graded answer replaced, a run's aggregates swapped, its status set) that
the other wrote to meanwhile, even other rows; two that only insert never do. The loser,
which committed nothing, tries again after a pause that doubles (0.05 s to 3.2 s, 6.35 s in
all, each drawn between half and the whole, so that two losers part)."""


def committed(attempt: Callable[[], T]) -> T:
    """`attempt()`, a whole transaction in a lake, tried again while another writer's commit
    comes first (COMMIT_TRIES); the last conflict, or any other error, is raised."""
    for tried in range(COMMIT_TRIES):
        try:
            return attempt()
        except Exception as error:
            if tried == COMMIT_TRIES - 1 or not is_commit_conflict(error):
                raise
            time.sleep(0.05 * 2**tried * JITTER.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def is_cut_short_at_open(error: BaseException) -> bool:
    """Whether DuckDB could not open a file because it ends inside what DuckDB reads to open
    it (its headers and first metadata)."""
    return "Could not read enough bytes" in str(error)


def is_interrupted(error: BaseException) -> bool:
    """Whether DuckDB's bindings report a Ctrl-C they saw during a query (a RuntimeError)."""
    return isinstance(error, RuntimeError) and "interrupted" in str(error).lower()
