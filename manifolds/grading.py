"""Answer extraction from free-form model output, shared by the manifold graders.

The rules, applied in order (documented in the README, "How answers are extracted"):

1. Reasoning is removed: every ``<think>…</think>`` block; text before a lone ``</think>``;
   everything after an unclosed ``<think>`` (a model still thinking has given no answer).
2. The *answer span* is the first of these that exists:
   a. the content of the last ``\\boxed{…}``;
   b. the text after the last answer marker: ``Answer:``, ``Final answer:``, ``The answer is``
      (any case, markdown emphasis allowed around it), up to the end of its line — or the next
      non-empty line when the marker stands alone on its line (``## Answer``);
   c. the last ``**bold**`` or ``__bold__`` text of the last non-empty line;
   d. the last non-empty line.
3. Each manifold parses the span (an integer, an item of the case, a list of integers). When
   the span comes from rule 2d the manifold is stricter (see each grader), because the last line
   of an explanation is not always an answer.

An answer that cannot be found is ``unparsed``, never ``wrong``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    """How one model response was judged."""

    CORRECT = "correct"
    WRONG = "wrong"
    UNPARSED = "unparsed"
    TRUNCATED = "truncated"
    ERROR = "error"


@dataclass(frozen=True)
class Grade:
    """A grader's verdict on one response."""

    outcome: Outcome
    answer: str | None
    """The answer as the grader understood it (normalised), or None when none was found."""


@dataclass(frozen=True)
class AnswerSpan:
    """The part of a response that holds the final answer."""

    text: str
    explicit: bool
    """True when marked as the answer (boxed, answer marker, bold); False for a bare last line."""


_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\s*\{")
_MARKER = re.compile(
    r"(?:final\s+answer|\banswer)\s*(?:[*_]{1,2}\s*)?(?:is\b\s*[:=]?|[:=：])|"
    r"\banswer\s+is\b\s*[:=]?",
    re.IGNORECASE,
)
_MARKER_ALONE = re.compile(r"^[\s#>*_`-]*(?:final\s+)?answer[\s*_`:]*$", re.IGNORECASE)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_DECORATION = " \t*_`#>:.\"'“”"


def strip_reasoning(text: str) -> str:
    """The response without its reasoning blocks (rule 1)."""
    text = _THINK_BLOCK.sub("\n", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:  # the server dropped the opening tag: keep what follows the last close
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text


def _last_boxed(text: str) -> str | None:
    starts = list(_BOXED.finditer(text))
    for match in reversed(starts):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[match.end() : i - 1]
    return None


def _clean(span: str) -> str:
    return span.strip().strip(_DECORATION).strip()


def answer_span(output: str) -> AnswerSpan | None:
    """The span of `output` that holds the final answer (rules 1 and 2), or None."""
    text = strip_reasoning(output)
    boxed = _last_boxed(text)
    if boxed is not None and boxed.strip():
        return AnswerSpan(_clean(re.sub(r"\\text\{([^}]*)\}", r"\1", boxed)), True)

    lines = [line for line in text.splitlines() if line.strip()]
    for line_no in range(len(lines) - 1, -1, -1):
        line = lines[line_no]
        if _MARKER_ALONE.match(line) and line_no + 1 < len(lines):
            return AnswerSpan(_clean(lines[line_no + 1]), True)
        markers = list(_MARKER.finditer(line))
        if markers:
            rest = _clean(line[markers[-1].end() :])
            if rest:
                return AnswerSpan(rest, True)
            if line_no + 1 < len(lines):
                return AnswerSpan(_clean(lines[line_no + 1]), True)
    if not lines:
        return None
    last = lines[-1]
    bolds = _BOLD.findall(last)
    if bolds:
        first, second = bolds[-1]
        return AnswerSpan(_clean(first or second), True)
    return AnswerSpan(_clean(last), False)


# ---------------------------------------------------------------------------- numbers

_WORD_VALUES = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_WORD_VALUES.update(
    {
        w: 10 * (i + 2)
        for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
    }
)
_WORD_VALUES["none"] = 0
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_TOKEN = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?|[a-z]+")
_TOKEN_GROUPED = re.compile(
    r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?![\d])|(?<![\w.])-?\d+(?:\.\d+)?|[a-z]+"
)


def parse_numbers(text: str, *, thousands_separators: bool = False) -> list[int | float]:
    """Every number written in `text`, in order: numerals and English number words.

    "twenty-one" -> 21, "one hundred and five" -> 105, "-3" -> -3, "7.0" -> 7, "7.5" -> 7.5.

    Args:
        text: the text to scan.
        thousands_separators: read "1,234" as one number (else as 1 and 234, which a
            comma-separated list of integers needs).
    """
    text = text.lower().replace("−", "-").replace("–", "-")
    pattern = _TOKEN_GROUPED if thousands_separators else _TOKEN
    numbers: list[int | float] = []
    total = current = 0
    in_words = False

    def flush() -> None:
        nonlocal total, current, in_words
        if in_words:
            numbers.append(total + current)
        total = current = 0
        in_words = False

    for token in pattern.findall(text):
        if token[0].isdigit() or token[0] == "-":
            flush()
            value = float(token.replace(",", ""))
            numbers.append(int(value) if value.is_integer() else value)
        elif token in _WORD_VALUES:
            if in_words and current % 10 == 0 and current > 0 and _WORD_VALUES[token] < 10:
                current += _WORD_VALUES[token]  # "twenty" "one"
            elif in_words and current and _WORD_VALUES[token]:
                flush()  # "three four": two numbers
                current, in_words = _WORD_VALUES[token], True
            else:
                current += _WORD_VALUES[token]
                in_words = True
        elif token in _SCALES and in_words:
            scale = _SCALES[token]
            if scale == 100:
                current = (current or 1) * 100
            else:
                total += (current or 1) * scale
                current = 0
        elif token == "and" and in_words:
            continue
        else:
            flush()
    flush()
    return numbers


# ---------------------------------------------------------------------------- phrases


def normalise_phrase(text: str) -> str:
    """Lower case, punctuation and markdown to spaces, articles dropped, spaces collapsed."""
    words = re.sub(r"[^0-9a-z]+", " ", text.lower()).split()
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def find_phrases(text: str, aliases: dict[str, str]) -> list[str]:
    """Keys whose alias phrases occur in `text` as whole words, in order of first occurrence.

    An occurrence inside a longer occurrence of another alias is ignored, so "second striker"
    does not also count as "striker".

    Args:
        text: free text.
        aliases: normalised phrase -> key it names.
    """
    haystack = f" {normalise_phrase(text)} "
    spans: list[tuple[int, int, str]] = []
    for phrase, key in aliases.items():
        needle = f" {phrase} "
        start = haystack.find(needle)
        while start != -1:
            spans.append((start, start + len(needle), key))
            start = haystack.find(needle, start + 1)
    kept = [
        s
        for s in spans
        if not any(o[0] <= s[0] and s[1] <= o[1] and (o[1] - o[0]) > (s[1] - s[0]) for o in spans)
    ]
    order: list[str] = []
    for _, _, key in sorted(kept):
        if key not in order:
            order.append(key)
    return order
