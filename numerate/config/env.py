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
    # Outside a flow (the journal's thread after a failed run, the command line) a line of
    # ours is shown without Prefect's warning that it cannot send it to the API.
    "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
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
_thresholds = gc.get_threshold()
"""The collector's thresholds as the outermost `startup_objects_frozen` block began."""

FULL_PASS_EVERY = 100
"""Passes of the collector's middle generation between two full passes while a sweep runs
(Python's default: 10; `startup_objects_frozen`)."""


@contextmanager
def startup_objects_frozen() -> Iterator[None]:
    """Keep the objects that exist now (imported modules, Prefect's client and settings, ...)
    out of the garbage collector's full passes while the block runs.

    A sweep's cases and answers live until it ends, and each time the objects that survive grow
    by a quarter, Python walks every object it tracks: with Prefect loaded that is some 370,000
    objects, six times in a 10,000-case sweep, about a tenth of its time. Frozen objects are
    skipped, never lost: they go back to the collector when the outermost block ends.

    A full pass also waits for FULL_PASS_EVERY passes of the middle generation, not Python's
    10: the cases of the batches in flight outlive two passes and are counted as new
    long-lived objects, so with Python's setting a 120,000-case sweep walked them 71 times
    (2.0 s of 27 s) and found 400 objects of garbage. The setting is put back as the
    outermost block ends.
    """
    global _freeze_depth, _thresholds
    with _freeze_lock:
        if _freeze_depth == 0:
            gc.freeze()
            _thresholds = gc.get_threshold()
            young, middle, full = _thresholds
            gc.set_threshold(young, middle, max(full, FULL_PASS_EVERY))
        _freeze_depth += 1
    try:
        yield
    finally:
        with _freeze_lock:
            _freeze_depth -= 1
            if _freeze_depth == 0:
                gc.set_threshold(*_thresholds)
                gc.unfreeze()
