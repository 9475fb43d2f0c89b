"""Whether this process was asked to stop (SIGINT or SIGTERM), for code below the command
line: an error raised while a command stops is the stop's doing (a task cut short, a
serialisation that met the KeyboardInterrupt), not a failure of what it ran. The command
line's signal handling (numerate.cli.process.PROCESS) says when; nothing else does."""

from __future__ import annotations

import threading
from collections.abc import Callable

_asked = threading.Event()
_at_exit: list[Callable[[], object]] = []


def ask() -> None:
    """Record that a stop signal came."""
    _asked.set()


def asked() -> bool:
    """Whether a stop signal came to this process."""
    return _asked.is_set()


def at_exit(cleanup: Callable[[], object]) -> None:
    """Have `cleanup` run as this process ends, also when a stop ends it early (the command
    line runs them: numerate.cli.process), the last registered first."""
    _at_exit.append(cleanup)


def exit_cleanups() -> list[Callable[[], object]]:
    """The cleanups `at_exit` registered, the last first; each is handed out once."""
    taken = list(reversed(_at_exit))
    _at_exit.clear()
    return taken
