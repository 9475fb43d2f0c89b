"""Naming runs the way people do: `latest`, `previous`, or a unique prefix of the id."""

from __future__ import annotations

from typing import Any, Protocol

from kernel.errors import ConfigError

__all__ = ["resolve_run"]


class Queryable(Protocol):
    path: str

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]: ...


def resolve_run(source: Queryable, text: str | None, sweep: str | None = None) -> str:
    """The full run id that `text` names: `latest` (also when None) and `previous` by start time
    (within `sweep` when given), else the one run whose id starts with `text`. ConfigError names
    the text when no run or several runs match."""
    where, params = ("WHERE sweep_name = ?", [sweep]) if sweep else ("", [])
    if text is None or text in ("latest", "previous"):
        offset = 1 if text == "previous" else 0
        rows = source.query(
            f"SELECT run_id FROM runs {where} ORDER BY started_at DESC LIMIT 1 OFFSET {offset}",
            params,
        )
        if not rows:
            scope = f" of sweep {sweep!r}" if sweep else ""
            wanted = "a previous run" if offset else "any run"
            raise ConfigError(f"{source.path} holds no {wanted}{scope}")
        return str(rows[0][0])
    text = text.strip()
    if not text:
        raise ConfigError("run id '': give an id, a unique prefix of one, latest or previous")
    rows = source.query(
        "SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY started_at DESC LIMIT 6",
        [text],
    )
    if not rows:
        raise ConfigError(f"run {text!r}: no run in {source.path} has an id starting so")
    if len(rows) > 1 and not any(r[0] == text for r in rows):
        ids = ", ".join(r[0] for r in rows[:5])
        raise ConfigError(f"run {text!r} is ambiguous: it starts {ids}; give more of the id")
    return str(rows[0][0]) if len(rows) == 1 else text
