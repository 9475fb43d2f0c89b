"""How one model's cases are asked: in batches, two at a time, as a `Sampler` opens them.

The flow gives `ask_in_batches` a function that asks and grades one batch (a Prefect task in
numerate.flows.sweep; a plain coroutine in tests). Pure: no Prefect, no I/O of its own.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from numerate.planning.adaptive import Sampler
from numerate.planning.plan import CaseRange
from numerate.store.rows import ResponseRow

AskBatch = Callable[[list[CaseRange], int], Awaitable[Sequence[ResponseRow]]]
"""Ask and grade a batch of cases (ranges of their points' cases, made where they are asked);
`first` is the batch's place in the model's cases. Returns the graded `responses` rows."""

IN_FLIGHT = 2
"""Batches asked at a time: the next fills the model's slots as one drains (they share its
concurrency), so the endpoint never idles between batches."""


async def ask_in_batches(
    sampler: Sampler,
    batch_size: int,
    ask: AskBatch,
    graded: Callable[[int], None] = lambda opened: None,
) -> int:
    """Ask every case `sampler` opens, `batch_size` at a time, `IN_FLIGHT` batches at once,
    telling the sampler each batch's grades as the oldest batch ends (then `graded`, with the
    cases that opened: an adaptive point's next round). An
    adaptive point's next round opens only when its round is graded: with nothing open and
    nothing in flight, asking is done. Returns the cases asked.

    When a batch fails (or the caller is cancelled), the batches in flight are cancelled and
    awaited before the error goes on: what they had answered is graded and stored already."""
    asking: deque[asyncio.Task[Sequence[ResponseRow]]] = deque()

    async def collect_oldest() -> None:
        graded(sampler.graded(await asking.popleft()))

    first = 0
    try:
        while True:
            taken = sampler.take(batch_size)
            if taken:
                asking.append(asyncio.ensure_future(ask(taken, first)))
                first += sum(len(part) for part in taken)
                if len(asking) == IN_FLIGHT:
                    await collect_oldest()
            elif asking:  # nothing more to ask until a round is graded
                await collect_oldest()
            else:
                return first
    except BaseException:
        for answering in asking:
            answering.cancel()
        await asyncio.gather(*asking, return_exceptions=True)
        raise
