"""Whether this process was asked to stop (SIGINT or SIGTERM), for code below the command
line: an error raised while a command stops is the stop's doing (a task cut short, a
serialisation that met the KeyboardInterrupt), not a failure of what it ran. The command
line's signal handling (numerate.cli.process.PROCESS) says when; nothing else does."""

from __future__ import annotations

import threading

_asked = threading.Event()


def ask() -> None:
    """Record that a stop signal came."""
    _asked.set()


def asked() -> bool:
    """Whether a stop signal came to this process."""
    return _asked.is_set()
