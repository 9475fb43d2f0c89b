"""What work says to its user while it goes on (numerate.kernel.progress.Progress.note),
recorded."""

from __future__ import annotations

from numerate.kernel.progress import Progress


class Notes(Progress):
    """A progress that keeps its notes in `notes` (use with
    numerate.kernel.progress.reporting_to)."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)
