"""`numerate grade`: grade answers written elsewhere (JSON Lines) with numerate's graders."""

from __future__ import annotations

import json
import sys
from collections import Counter
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
    from numerate.kernel.files import read_text
    from numerate.kernel.inputs import MAX_DATA_BYTES

    try:
        check_output("--out", out)
        graded = grade_lines(read_text(path, limit=MAX_DATA_BYTES).splitlines(), str(path))
    except NumerateError as error:
        fail(error)
        return
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in graded)
    if out is None:
        sys.stdout.write(lines)
        return
    write_output(out, lines)
    counts = Counter(r["outcome"] for r in graded)
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    answers = f"{len(graded)} answer{'' if len(graded) == 1 else 's'}"
    typer.echo(f"graded {answers} ({summary or 'none'}) -> {out}", err=True)
