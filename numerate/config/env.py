"""Process settings: defaults set before Prefect is imported (offline, quiet, our logger
captured), and the garbage collector's view of a sweep."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

PREFECT_DEFAULTS = {
    # Prefect must never try to reach the internet (analytics, telemetry).
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # Progress lines of the `numerate` logger go to Prefect's run logs on workers.
    "PREFECT_LOGGING_EXTRA_LOGGERS": "numerate",
}


def configure() -> None:
    """Apply the defaults; a variable the user already set wins. A PREFECT_API_URL set
    empty (`PREFECT_API_URL= numerate ...`, the shell's way to clear it) is unset: Prefect
    took it for an address, and its event worker printed some 280 lines of tracebacks."""
    if os.environ.get("PREFECT_API_URL") == "":
        del os.environ["PREFECT_API_URL"]
    for name, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(name, value)


_freeze_lock = threading.Lock()
_freeze_depth = 0


@contextmanager
def startup_objects_frozen() -> Iterator[None]:
    """Keep the objects that exist now (imported modules, Prefect's client and settings, ...)
    out of the garbage collector's full passes while the block runs.

    A sweep's cases and answers live until it ends, and each time the objects that survive grow
    by a quarter, Python walks every object it tracks: with Prefect loaded that is some 370,000
    objects, six times in a 10,000-case sweep, about a tenth of its time. Frozen objects are
    skipped, never lost: they go back to the collector when the outermost block ends.
    """
    global _freeze_depth
    with _freeze_lock:
        if _freeze_depth == 0:
            gc.freeze()
        _freeze_depth += 1
    try:
        yield
    finally:
        with _freeze_lock:
            _freeze_depth -= 1
            if _freeze_depth == 0:
                gc.unfreeze()
