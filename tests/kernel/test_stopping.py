"""numerate.kernel.stopping: cleanups handed out at the process's end (pure bookkeeping)."""

from numerate.kernel import stopping


def test_cleanups_are_handed_out_once_the_last_registered_first(monkeypatch):
    """A third mutation sweep: their order and their handing out once were untested."""
    monkeypatch.setattr(stopping, "_at_exit", [])
    ran: list[str] = []
    stopping.at_exit(lambda: ran.append("first"))
    stopping.at_exit(lambda: ran.append("second"))
    for cleanup in stopping.exit_cleanups():
        cleanup()
    assert ran == ["second", "first"]
    assert stopping.exit_cleanups() == []
