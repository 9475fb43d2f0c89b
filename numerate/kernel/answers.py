"""The bound on a stored answer: however much an endpoint (or a shard) sends, numerate keeps
at most MAX_ANSWER_CHARS characters of one answer.

A longer answer is stored cut: its first HEAD_CHARS characters, a line saying where it was
cut (SEAM), and its last TAIL_CHARS, with a flag and the length it had. The end is kept in
full because that is where the graders look (the text after the last closing reasoning tag,
the last `\\boxed{}`, the last answer marker, the last line); the beginning because an
unclosed `<think>` there means the model never stopped thinking. The outcome is graded on
the stored text, so grading it again (`numerate regrade`, an ingest) gives the same outcome.
"""

from __future__ import annotations

import zlib

__all__ = [
    "HEAD_CHARS",
    "MAX_ANSWER_CHARS",
    "SEAM",
    "TAIL_CHARS",
    "compression_ratio",
    "cut_answer",
    "cut_sql",
]

MAX_ANSWER_CHARS = 262_144
"""The most characters stored of one answer (about 65,000 tokens of English text)."""

SEAM = "\n[… numerate cut the text here …]\n"
"""The line a cut answer holds where its middle was left out (no digit, no answer marker: no
grader reads it as an answer)."""

HEAD_CHARS = 65_536
"""The characters kept of a cut answer's beginning."""

TAIL_CHARS = MAX_ANSWER_CHARS - HEAD_CHARS - len(SEAM)
"""The characters kept of a cut answer's end."""


def cut_answer(text: str) -> tuple[str, int | None]:
    """`text` as numerate stores it, and its length when it was cut (None when kept whole)."""
    if len(text) <= MAX_ANSWER_CHARS:
        return text, None
    return text[:HEAD_CHARS] + SEAM + text[-TAIL_CHARS:], len(text)


def cut_sql(column: str) -> str:
    """The SQL expression (DuckDB) of `column` as `cut_answer` stores it: DuckDB's `left`,
    `right` and `length` count characters (code points) as Python does."""
    seam = SEAM.replace("'", "''")
    return (
        f"CASE WHEN length({column}) > {MAX_ANSWER_CHARS} THEN "
        f"left({column}, {HEAD_CHARS}) || '{seam}' || right({column}, {TAIL_CHARS}) "
        f"ELSE {column} END"
    )


def compression_ratio(text: str) -> float | None:
    """How much a text repeats itself: its UTF-8 bytes over their zlib compression at level 9
    (1 or a little less for text that never repeats, 2 to 4 for ordinary prose, far more for a
    reasoning trace that loops); None for an empty text. Of the text as stored (a cut one:
    its head and tail)."""
    data = text.encode("utf-8", "surrogatepass")
    return len(data) / len(zlib.compress(data, 9)) if data else None
