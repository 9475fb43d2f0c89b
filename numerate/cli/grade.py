"""`numerate grade`: grade answers written elsewhere (JSON Lines) with numerate's graders."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import check_output, fail, path_argument, path_option, write_output
from numerate.kernel.errors import NumerateError


@app.command()
def grade(
    path: Annotated[
        Path,
        path_argument("JSON Lines: cases with a `response` field."),
    ],
    out: Annotated[
        Path | None,
        path_option("File to write (default: standard output)."),
    ] = None,
) -> None:
    """Grade answers from any source (JSON Lines of cases with their responses).

    Each line is a case as `numerate generate` writes it plus `response` (and optionally
    `finish_reason`); each is written back with `outcome` and `answer`.
    """
    from numerate.grading.files import grade_lines
    from numerate.kernel.files import text_lines
    from numerate.kernel.inputs import MAX_DATA_BYTES

    counts: Counter[str] = Counter()

    def graded() -> Iterator[str]:
        # a JSON line ends at a line feed only: a text in it may hold U+2028 or U+0085, which
        # `splitlines` took for line ends (numerate's own output could not be graded again)
        for record in grade_lines(text_lines(path, MAX_DATA_BYTES), str(path)):
            counts[record["outcome"]] += 1
            yield json.dumps(record, ensure_ascii=False) + "\n"

    try:
        check_output("--out", out)
        # standard output gets the lines once all are graded (none when one is refused); a
        # file is written as they are, under a temporary name removed when one is refused
        written = list(graded()) if out is None else []
    except NumerateError as error:
        fail(error)
        return
    if out is None:
        sys.stdout.writelines(written)
        return
    write_output(out, lambda handle: handle.writelines(line.encode() for line in graded()))
    total = sum(counts.values())
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    answers = f"{total} answer{'' if total == 1 else 's'}"
    typer.echo(f"graded {answers} ({summary or 'none'}) -> {out}", err=True)
