"""Waiting in tests: on a condition, with a timeout, never for a fixed time.

A fixed sleep ("it is waiting by now") is either too short on a loaded machine (a flaky test)
or longer than needed everywhere else (a slow one). Tests poll what they wait for instead. A
sleep that is part of a scenario (an endpoint that answers late, a program that holds a file for
a while, a second signal sent after the product's own one-second window) is no wait: it stays,
saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_s: float = 60, what: str = "") -> T:
    """Poll `condition` until it returns something true, and return that; AssertionError
    naming `what` when it has not within `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what or condition}")
        time.sleep(0.02)


def waits_for_the_database(db: Path | str, pid: int) -> bool:
    """Whether process `pid` waits for the results database `db` that another holds: it says
    so with a file in `<db>.waiting/` (numerate.store.access) once it has waited 50 ms."""
    return any(Path(f"{db}.waiting").glob(f"{pid}.*"))


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has used (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has the file `path` open (Linux /proc: its links are resolved)."""
    target = path.resolve()
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # it has ended
        return False
    for descriptor in descriptors:
        try:
            if descriptor.readlink() == target:
                return True
        except OSError:  # closed meanwhile
            continue
    return False
