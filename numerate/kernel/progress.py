"""Progress of long work: requests done, rate, errors, ETA.

The code that does the work reports to `current()`; the CLI installs a terminal progress bar,
and anywhere else (a deployment on a worker) progress goes to the log every few seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from numerate.kernel.errors import for_terminal

logger = logging.getLogger("numerate")


@dataclass
class Tally:
    """What one piece of work counted (`Progress.tallied`), to take back if it is done again."""

    done: int = 0
    errors: int = 0
    cached: int = 0


_tally: ContextVar[Tally | None] = ContextVar("numerate_progress_tally", default=None)
"""The tally of the work running in this context (its asyncio tasks and threads inherit it)."""


class Progress:
    """Counts requests; subclasses decide how to show them. Safe to call from any thread."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.errors = 0
        self.cached = 0
        self.retries = 0
        self.started = time.monotonic()
        self.step = ""
        """What the work is doing now, when the counts do not say it (generating cases)."""
        self._limits: dict[Hashable, Any] = {}
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def add_total(self, n: int) -> None:
        with self._lock:
            self.total += n
        self.render()

    def doing(self, step: str) -> None:
        """Say what the work is doing now ("" once the counts say it all)."""
        with self._lock:
            self.step = step
        self.render()

    def advance(self, n: int = 1, *, errors: int = 0, cached: int = 0) -> None:
        with self._lock:
            self.done += n
            self.errors += errors
            self.cached += cached
            tally = _tally.get()
            if tally is not None:
                tally.done += n
                tally.errors += errors
                tally.cached += cached
        self.render()

    @contextmanager
    def tallied(self) -> Iterator[Tally]:
        """Count what the block advances (the tasks and threads it starts included) apart as
        well, so that `take_back` can undo it: a batch tried again after a failure counts
        again the answers its failed try counted."""
        tally = Tally()
        token = _tally.set(tally)
        try:
            yield tally
        finally:
            _tally.reset(token)

    def take_back(self, tally: Tally) -> None:
        """Undo what `tally` counted."""
        self.advance(-tally.done, errors=-tally.errors, cached=-tally.cached)

    def points_open(self, name: str, n: int) -> None:
        """Grid points of a model still sampling adaptively (the total grows as they go on)."""
        with self._lock:
            self._open[name] = n
        self.render()

    def open_points(self) -> int | None:
        """Adaptive grid points still open, over every model (None: no adaptive sampling)."""
        with self._lock:
            return sum(self._open.values()) if self._open else None

    def retried(self, n: int = 1) -> None:
        """A request is being sent again (a rate limit, a timeout, a 5xx)."""
        with self._lock:
            self.retries += n
        self.render()

    def watch_limit(self, model: Hashable, limit: Any) -> None:
        """Show a model's adaptive limit (anything with `allowed`) beside the counts; `model`
        says whose (two runs' models named alike on two endpoints have a limit each)."""
        with self._lock:
            self._limits[model] = limit

    def in_flight_limit(self) -> int | None:
        """The current limit on requests in flight, over every model (None: no endpoint)."""
        with self._lock:
            limits = list(self._limits.values())
        return sum(limit.allowed for limit in limits) if limits else None

    def rate(self) -> float:
        """Requests per second so far (cached answers included)."""
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta_s(self) -> float | None:
        rate = self.rate()
        return (self.total - self.done) / rate if rate > 0 else None

    def line(self) -> str:
        eta = self.eta_s()
        shown_eta = f", ETA {eta:,.0f} s" if eta is not None and self.done < self.total else ""
        limit = self.in_flight_limit()
        shown_limit = f", at most {limit} in flight" if limit is not None else ""
        open_points = self.open_points()
        shown_open = f" planned so far, {open_points} points still sampling" if open_points else ""
        return (
            f"{f'{self.step}: ' if self.step else ''}"
            f"{self.done:,}/{self.total:,} requests{shown_open} ({self.cached:,} cached), "
            f"{self.rate():,.1f}/s, {self.errors:,} errors, {self.retries:,} retries"
            f"{shown_limit}{shown_eta}"
        )

    def render(self) -> None:
        """Show the current state (nothing by default)."""

    def note(self, message: str) -> None:
        """Say something the user should know while the work goes on (a wait for the results
        database): a warning in the log by default, `note:` first as on a terminal."""
        logger.warning("note: %s", for_terminal(message))

    def close(self) -> None:
        """Final display."""


class LogProgress(Progress):
    """Logs a progress line at most every `every_s` seconds, and at the end."""

    def __init__(self, every_s: float = 10.0) -> None:
        super().__init__()
        self.every_s = every_s
        self._last = 0.0

    def render(self) -> None:
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            logger.info("progress: %s", self.line())

    def close(self) -> None:
        logger.info("done: %s", self.line())


_current: Progress = LogProgress()


def current() -> Progress:
    """Where work reports progress now."""
    return _current


@contextmanager
def reporting_to(progress: Progress) -> Iterator[Progress]:
    """Send progress to `progress` inside the block."""
    global _current
    previous, _current = _current, progress
    try:
        yield progress
    finally:
        progress.close()
        _current = previous
