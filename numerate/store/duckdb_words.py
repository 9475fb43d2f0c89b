"""What DuckDB tells only in words: its errors carry no code for these cases, so the match on
its messages lives here, in one place, and tests/store/test_duckdb_words.py pins each message
on the DuckDB that is installed (an upgrade that rewords one fails there, not in a user's run).
"""

from __future__ import annotations


def sql_literal(text: str) -> str:
    """`text` as a SQL string literal (quoted, its quotes doubled): for the statements that
    take no parameter (ATTACH, COPY ... TO, a table function's file name, SET)."""
    return "'" + text.replace("'", "''") + "'"


def is_lock_conflict(error: BaseException) -> bool:
    """Whether DuckDB refused to open a file because another process holds its lock."""
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


def is_damaged(error: BaseException) -> bool:
    """Whether a DuckDB error is about the file itself (unreadable, cut short, a block whose
    checksum does not match), not about the SQL."""
    import duckdb

    return isinstance(error, duckdb.IOException) or "Corrupt database" in str(error)


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


def is_cut_short_at_open(error: BaseException) -> bool:
    """Whether DuckDB could not open a file because it ends inside what DuckDB reads to open
    it (its headers and first metadata)."""
    return "Could not read enough bytes" in str(error)


def is_interrupted(error: BaseException) -> bool:
    """Whether DuckDB's bindings report a Ctrl-C they saw during a query (a RuntimeError)."""
    return isinstance(error, RuntimeError) and "interrupted" in str(error).lower()
