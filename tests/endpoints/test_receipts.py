"""Answers of one turn of the event loop go to the journal in one write, and a write that
fails fails every answer waiting on it; a batch's claims of its requests are given up however
it ends."""

import asyncio

import pytest

from numerate.endpoints.answering import BeingAsked, Receipts


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


class Terminated(BaseException):
    """A stop that is no KeyboardInterrupt: Prefect's TerminationSignal is one."""


def test_a_stop_in_a_write_ends_the_waits_of_its_answers_and_keeps_their_rows():
    """A third mutation sweep: without the cancel, every answer of the interrupted write
    waited for ever. asyncio reports a stop other than KeyboardInterrupt that is raised in a
    callback (the write is one) and runs on, so the waits must end here."""
    journal = Journal(Terminated())
    reported = []

    async def answer():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context["exception"]))
        receipts = Receipts(journal)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(receipts.keep([{"c": 0}], [{"r": 0}]), 5)
        return receipts

    receipts = asyncio.run(answer())
    assert [type(error) for error in reported] == [Terminated]
    assert (receipts.completions, receipts.responses) == ([{"c": 0}], [{"r": 0}])


def test_a_block_that_ends_journals_what_a_failed_write_left_kept():
    """A full disk fails a write; once it has room again, the block's end writes the rows."""
    journal = Journal(OSError(28, "No space left on device"))

    async def answers():
        with Receipts(journal) as receipts:
            with pytest.raises(OSError):
                await receipts.keep([{"c": 0}], [{"r": 0}])
            journal.error = None
        return receipts

    receipts = asyncio.run(answers())
    assert journal.writes == [("completions", [{"c": 0}]), ("responses", [{"r": 0}])]
    assert receipts.failed is not None  # the batch still fails: its next try is clean


def test_a_stop_that_ends_the_block_is_what_is_raised_not_the_journal_s_error():
    """The journal fails as the stop ends the block (a full disk): the stop is the news."""
    journal = Journal(OSError(28, "No space left on device"))
    with pytest.raises(KeyboardInterrupt), Receipts(journal) as receipts:
        receipts.responses.append({"r": 0})
        raise KeyboardInterrupt
    assert receipts.responses == [{"r": 0}]  # not written, not lost from the block


def test_a_batch_that_fails_before_it_asks_gives_its_claims_up():
    """A third mutation sweep: without it, the requests of a batch that failed before asking
    (the database busy) stayed claimed, and its retry waited for ever on answers that no
    batch was asking."""
    asking = BeingAsked()
    with pytest.raises(OSError), asking.claimed("run-1", ["a", "b"]) as first:
        assert first.open == {"a", "b"} and first.beside == {}
        with asking.claimed("run-1", ["b", "c"]) as beside:
            assert beside.open == {"c"} and set(beside.beside) == {"b"}
            raise OSError("the database is busy")
    assert beside.beside["b"].result(timeout=0) is None  # no answer kept: it asks it itself
    with asking.claimed("run-1", ["a", "b", "c"]) as retry:
        assert retry.open == {"a", "b", "c"} and retry.beside == {}
    # another run's requests are its own
    with asking.claimed("run-2", ["a"]) as other_run, asking.claimed("run-1", ["a"]) as this_run:
        assert other_run.open == {"a"} and this_run.open == {"a"}
