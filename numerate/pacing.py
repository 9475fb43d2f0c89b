"""How many requests a model is asked at once: a ceiling, lowered when the server says it is
busy and raised again as answers come back (additive increase, multiplicative decrease).

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


class AdaptiveLimit:
    """At most `allowed` requests in flight; `allowed` starts at `ceiling` (the model's
    `concurrency`), drops on a rate limit (429) or an overloaded server (503) to the requests
    the server is still taking, and grows back slowly (half a request per round of
    successful answers): it settles just under what the server takes. Waiters are served
    first come, first served."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.throttles = 0
        """Requests refused by a rate limit so far."""
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

    def succeeded(self) -> None:
        """An answer came back: grow by one request per two rounds of answers."""
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + GROWTH / self.limit)
            self._wake()

    def throttled(self) -> None:
        """A request was refused as one too many (its slot already given back): the server
        took the requests still in flight, so allow no more than those, and at least a tenth
        fewer than now."""
        self.throttles += 1
        self.limit = max(1.0, min(self.limit * SHRINK, float(self.in_flight)))

    async def __aenter__(self) -> AdaptiveLimit:
        await self.acquire()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:  # fmt: skip
        self.release()
