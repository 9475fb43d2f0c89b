"""How many requests a model is asked at once: a ceiling, lowered when the server says it is
busy and raised again as answers come back (additive increase, multiplicative decrease), never
back to a level the server refused until it has answered a while without refusing.

Pure asyncio: no I/O. One limit per model and event loop, shared by every batch.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

GROWTH = 0.5
"""Requests added to the limit per round of successful answers (a round: `allowed` answers)."""
SHRINK = 0.9
"""The limit after a refusal is at most this share of what it was."""
QUIET_ROUNDS = 8
"""Rounds of answers without a refusal after which the limit may probe one request above the
level that was refused."""
START = 4
"""Requests a model is first asked at once (at most its `concurrency`): until the first
refusal the limit grows by one request per answer (doubling each round, as TCP's slow start),
so a server that takes fewer than `concurrency` refuses a few requests, not a whole burst."""
MAX_QUIET_ROUNDS = 64
"""The longest wait between probes: each probe the server refuses doubles the wait, up to this."""


class AdaptiveLimit:
    """At most `allowed` requests in flight; `allowed` starts at `START` and doubles each
    round of answers up to `ceiling` (the model's `concurrency`) until the first refusal,
    drops on a rate limit (429) or an overloaded server (503) to the requests the server is
    still taking, and grows back slowly (half a request per round of
    successful answers), but stays below the level that drew the refusal (`refused_at`) until
    the server has answered `QUIET_ROUNDS` rounds without one. Then it probes one request
    higher; a probe refused doubles the next wait (up to `MAX_QUIET_ROUNDS`). So it settles
    just under what the server takes, and a server that takes only so many sees a refusal
    now and then, not every few rounds. Waiters are served first come, first served."""

    def __init__(self, ceiling: int, start: int = START) -> None:
        self.ceiling = ceiling
        self.limit = float(min(ceiling, start))
        self.starting = self.limit < ceiling
        """Slow start: no refusal yet, growing by one request per answer."""
        self.in_flight = 0
        self.throttles = 0
        """Requests refused by a rate limit so far."""
        self.refused_at: int | None = None
        """The fewest requests in flight that drew a refusal since the last quiet spell
        (None: none, or the limit has probed back up to the ceiling)."""
        self.quiet = 0
        """Answers since the last refusal or probe."""
        self.patience = QUIET_ROUNDS
        """Rounds of quiet the next probe waits for."""
        self.probing = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def allowed(self) -> int:
        return max(1, int(self.limit))

    async def acquire(self) -> None:
        if self.in_flight < self.allowed and not self._waiters:
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted as we were cancelled: give the slot back
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.allowed:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    @property
    def top(self) -> int:
        """The most the limit may grow to now: below the level refused, else the ceiling."""
        return self.ceiling if self.refused_at is None else self.refused_at - 1

    def succeeded(self) -> None:
        """An answer came back: grow by one request per two rounds of answers, up to `top`;
        after a quiet spell, raise `top` by one (a probe)."""
        self.quiet += 1
        if self.starting:
            self.limit = min(float(self.ceiling), self.limit + 1)
            self.starting = self.limit < self.ceiling
            self._wake()
            return
        if self.refused_at is not None and self.quiet >= self.patience * self.allowed:
            if self.probing:  # the last probe was answered: the next one need not wait longer
                self.patience = QUIET_ROUNDS
            self.refused_at += 1
            self.quiet = 0
            self.probing = True
            if self.refused_at > self.ceiling:
                self.refused_at, self.probing = None, False
        if self.limit < self.top:
            self.limit = min(float(self.top), self.limit + GROWTH / self.limit)
            self._wake()

    def throttled(self) -> None:
        """A request was refused as one too many (its slot already given back): the server
        took the requests still in flight, so allow no more than those, and at least a tenth
        fewer than now; remember the level refused (those plus the refused one)."""
        self.throttles += 1
        self.quiet = 0
        self.starting = False
        if self.probing:  # the probe was refused: wait longer before the next one
            self.patience = min(MAX_QUIET_ROUNDS, 2 * self.patience)
            self.probing = False
        level = max(2, self.in_flight + 1)
        self.refused_at = level if self.refused_at is None else min(self.refused_at, level)
        self.limit = max(1.0, min(self.limit * SHRINK, float(self.in_flight), float(self.top)))

    async def __aenter__(self) -> AdaptiveLimit:
        await self.acquire()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:  # fmt: skip
        self.release()
