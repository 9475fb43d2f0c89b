"""Answers of one turn of the event loop go to the journal in one write, and a write that
fails fails every answer waiting on it."""

import asyncio

import pytest

from numerate.endpoints.answering import Receipts


class Journal:
    """Records each write (table, rows); fails them all with `error`."""

    def __init__(self, error=None):
        self.writes, self.error = [], error

    def receive(self, table, rows):
        if self.error is not None:
            raise self.error
        self.writes.append((table, list(rows)))


def test_the_answers_of_one_turn_are_written_together_and_the_next_turns_apart():
    journal = Journal()

    async def answers():
        receipts = Receipts(journal)
        first = [receipts.keep([{"c": i}], [{"r": i}]) for i in range(3)]
        assert journal.writes == []  # nothing before the turn ends
        await asyncio.gather(*first)
        assert journal.writes == [("completions", [{"c": 0}, {"c": 1}, {"c": 2}]),
                                  ("responses", [{"r": 0}, {"r": 1}, {"r": 2}])]  # fmt: skip
        await receipts.keep([], [{"r": 3}])
        assert journal.writes[2:] == [("responses", [{"r": 3}])]  # no empty write

    asyncio.run(answers())


def test_a_journal_that_cannot_write_fails_every_answer_of_the_turn():
    journal = Journal(OSError(28, "No space left on device"))

    async def answers():
        receipts = Receipts(journal)
        waits = [receipts.keep([], [{"r": i}]) for i in range(2)]
        return await asyncio.gather(*waits, return_exceptions=True)

    failed = asyncio.run(answers())
    assert [type(e) for e in failed] == [OSError, OSError]
    with pytest.raises(OSError, match="No space"):
        raise failed[0]


class Interrupted(Journal):
    """A stop signal raised in the middle of the first write (after its first table), as
    Python raises one wherever the main thread is."""

    def __init__(self):
        super().__init__()
        self.receives = 0

    def receive(self, table, rows):
        self.receives += 1
        if self.receives == 2:
            raise KeyboardInterrupt
        super().receive(table, rows)


def test_a_stop_in_the_middle_of_a_write_loses_no_row_of_the_turn():
    journal = Interrupted()

    async def answers():
        with Receipts(journal) as receipts:
            waits = [receipts.keep([{"c": i}], [{"r": i}]) for i in range(3)]
            await asyncio.gather(*waits)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(answers())
    assert journal.writes == [("completions", [{"c": 0}, {"c": 1}, {"c": 2}]),
                              ("responses", [{"r": 0}, {"r": 1}, {"r": 2}])]  # fmt: skip
