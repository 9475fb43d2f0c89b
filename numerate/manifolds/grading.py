"""Answer extraction from free-form model output, shared by the manifold graders.

The rules, applied in order (documented in docs/manifolds.md, "How answers are extracted"):

1. Reasoning is removed. The wrappers are ``<think>``, ``<thinking>``, ``<reasoning>``,
   ``[THINK]`` and ``◁think▷``, each closed by its ``/`` form, in any case. Only the text after
   the last closing tag counts (also when a server dropped the opening tag); an opening tag
   left unclosed after it means the model is still thinking: no answer.
2. *Candidate spans* are tried in this order; the first one the manifold can read is the
   answer, so a marker followed by no value ("I hope this answer is helpful!") does not count:
   a. ``\\boxed{…}`` (``\\text{…}`` and other LaTeX wrappers unwrapped): the last one, or
      all of them in order when the manifold wants a list;
   b. each answer marker, the last first: ``Answer:``, ``Final answer:``, ``The answer is``
      (any case, markdown emphasis allowed around it), spanning the text after it up to the
      end of its line or the next marker. A marker that ends its line (``## Answer``,
      ``**Answer:**``) spans the next line, or the bullet list that starts there when the
      manifold wants a list (bullets stripped; for one value, a list of several items is no
      span); a next line with a marker of its own is that marker's. Markers on a *remark
      line*, one entirely in parentheses with a word in it ("(If pants counted, the answer is
      17.)"), do not count. Only the last 200 markers are looked at;
   c. the last ``**bold**`` or ``__bold__`` text of the last line;
   d. the last line, a *bare* span.
   Remark lines and closing pleasantries ("I hope this helps!") are passed over (three at
   most) when looking for 2b's next line and for the last line. A span longer than 10,000
   characters is not an answer.
3. Each manifold reads the span (an integer, an item of the case, a list of integers). A bare
   span is read more strictly (see each grader), because the last line of an explanation is
   not always an answer. Two different values offered as alternatives ("14 or 15") are no
   answer (`is_hedge`).

An answer that cannot be found is ``unparsed``, never ``wrong``. Everything here runs in time
linear in the length of the response: nesting is followed to a bounded depth (three levels of
braces, two of parentheses) with possessive patterns, so no input makes a regex backtrack.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")


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


_REASONING_OPEN = re.compile(r"<(?:think|thinking|reasoning)>|\[think\]|◁think▷", re.IGNORECASE)
_REASONING_LAST_CLOSE = re.compile(
    r"(?s:.*)(?:</(?:think|thinking|reasoning)>|\[/think\]|◁/think▷)", re.IGNORECASE
)
# \boxed{…} with up to three levels of braces inside and no other \boxed: possessive, and an
# attempt stops at the next \boxed, so no character is scanned twice.
_BOXED_CHARS = r"(?:[^{}\\]++|\\(?!boxed))"
_BOXED = re.compile(
    rf"\\boxed\s*+\{{((?:{_BOXED_CHARS}|\{{(?:{_BOXED_CHARS}|\{{{_BOXED_CHARS}*+\}})*+\}})*+)\}}"
)
_LATEX_WRAPPER = re.compile(
    r"\\(?:boxed|text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|emph)\s*+\{([^{}]*+)\}"
)
_LATEX_SPACE = re.compile(r"\\[,;:! ]|\\[()\[\]]|\\q?quad\b|\$")
# An answer marker is the word "answer" followed by ":", "=" or "is" ("**Answer:**", "The final
# answer is"), or alone on its line with decoration ("## Answer"). The word is found by a plain
# scan: one regex for whole markers, tried at every position, costs ten times more.
_ANSWER_WORD = re.compile(r"[aA][nN][sS][wW][eE][rR]")
_MARKER_SUFFIX = re.compile(r"[ \t]*+(?:[*_]{1,2}[ \t]*+)?(?:[iI][sS]\b[ \t]*+[:=]?|[:=：])")
_HEADING_PREFIX = re.compile(r"[ \t#>*_`-]*+(?:[fF][iI][nN][aA][lL][ \t]++)?")
_HEADING_SUFFIX = re.compile(r"[ \t*_`:]*+(?=\n|\Z)")
# A parenthesised group, nested two deep at most; a *remark* is one with a letter in it.
_PARENTHESISED = re.compile(r"\((?:[^()]++|\([^()]*+\))*+\)")
_REMARK_PATTERN = (
    r"\((?:[^()a-zA-Z]++|\([^()a-zA-Z]*+\))*+"  # what comes before the first letter
    r"(?:[a-zA-Z]|\([^()a-zA-Z]*+[a-zA-Z][^()]*+\))"  # the first letter
    r"(?:[^()]++|\([^()]*+\))*+\)"
)
_REMARK = re.compile(_REMARK_PATTERN)
_REMARK_LINE = re.compile(rf"[ \t>*_]*+{_REMARK_PATTERN}[ \t*_.]*+")
_CLOSING_LINE = re.compile(
    r"[ \t>*_]*+(?:i hope|hope (?:this|that|it)|let me know|feel free|if you have (?:any|more)|"
    r"is there anything|happy to help|glad to help|good luck|thanks?\b|thank you)",
    re.IGNORECASE,
)
_LINE = re.compile(r"^[^\S\n]*+\S[^\n]*", re.MULTILINE)
_BULLET = re.compile(r"[-*+•][ \t]++")
_NUMBERED = re.compile(r"(\d{1,3})[.)][ \t]++")
_BOLD = re.compile(r"\*\*([^*\n]++)\*\*|__([^_\n]++)__")
_DECORATION = " \t*_`#>:.\"'“”"
_ASIDES_SKIPPED = 3
"""Remark and closing lines passed over when looking for a line that holds the answer."""
_LIST_ITEMS = 50
"""A longer bullet list after a marker is not an answer."""
_MARKERS_TRIED = 200
"""Only the last markers are looked at: a response with more is read from its last ones."""
MAX_SPAN_CHARS = 10_000
"""A longer span is not an answer: it is not read (this also bounds the cost of reading)."""


def strip_reasoning(text: str) -> str:
    """The response without its reasoning (rule 1): only the text after the last closing tag
    counts, and nothing at all while an opening tag is left unclosed."""
    last_close = _REASONING_LAST_CLOSE.match(text)
    if last_close:
        text = text[last_close.end() :]
    return "" if _REASONING_OPEN.search(text) else text


def reasoning_part(text: str) -> str | None:
    """The reasoning a response holds in its text, what `strip_reasoning` leaves out: all up
    to its last closing tag, or from an opening tag left unclosed to the end (a response cut
    inside its reasoning); None when it holds none."""
    last_close = _REASONING_LAST_CLOSE.match(text)
    if last_close:
        return text[: last_close.end()]
    opened = _REASONING_OPEN.search(text)
    return text[opened.start() :] if opened else None


def _unlatex(text: str) -> str:
    if "\\" not in text and "$" not in text and "{" not in text:
        return text
    text = text.replace("{,}", ",").replace("\\&", "&")
    for _ in range(3):  # nested wrappers, the innermost first
        text, found = _LATEX_WRAPPER.subn(r"\1", text)
        if not found:
            break
    return _LATEX_SPACE.sub(" ", text)


def _clean(span: str) -> str:
    return _unlatex(span).strip().strip(_DECORATION).strip()


def drop_parenthesised(text: str, *, remarks_only: bool = False) -> str:
    """`text` without its parenthesised groups (nested two deep at most).

    Args:
        text: the text.
        remarks_only: drop only *remarks*, groups with a letter in them ("(each adds 3)"),
            and keep "(11, 14, 17)" or "(= 5 + 2)".
    """
    return (_REMARK if remarks_only else _PARENTHESISED).sub(" ", text)


def _is_aside(text: str, start: int, end: int) -> bool:
    """Whether text[start:end], a line, is a remark or a closing pleasantry."""
    return bool(_REMARK_LINE.fullmatch(text, start, end) or _CLOSING_LINE.match(text, start, end))


def _lines_after(text: str, pos: int) -> Iterator[str]:
    """The non-blank lines after `pos`, stripped, passing over a few asides."""
    skipped = 0
    for line in _LINE.finditer(text, pos):
        if _is_aside(text, line.start(), line.end()):
            skipped += 1
            if skipped > _ASIDES_SKIPPED:
                return
            continue
        yield line.group().strip()


def _list_items(lines: list[str]) -> list[str] | None:
    """The items of a bullet list ("- 6", "1. 6"), or None when the lines are not one."""
    bullets = [_BULLET.match(line) for line in lines]
    if all(bullets):
        return [line[m.end() :] for line, m in zip(lines, bullets, strict=True) if m]
    numbered = [m for line in lines if (m := _NUMBERED.match(line))]
    if len(numbered) < len(lines):
        return None
    numbers = [int(m.group(1)) for m in numbered]
    consecutive = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    if not consecutive or (len(numbers) == 1 and numbers[0] != 1):
        return None  # "14. That is all." is a line, not a list
    return [line[m.end() :] for line, m in zip(lines, numbered, strict=True)]


def _marker_end(text: str, hit: int) -> int | None:
    """Where the answer marker ends whose word "answer" starts at `hit`, or None when that word
    is not a marker."""
    if hit and text[hit - 1].isalnum():
        return None  # "reanswer"
    after = hit + len("answer")
    inline = _MARKER_SUFFIX.match(text, after)
    if inline:
        return inline.end()
    alone = _HEADING_SUFFIX.match(text, after)  # the word ends its line: a heading?
    if alone and _HEADING_PREFIX.fullmatch(text, text.rfind("\n", 0, hit) + 1, hit):
        return alone.end()
    return None


def _has_marker(line: str) -> bool:
    return any(_marker_end(line, word.start()) is not None for word in _ANSWER_WORD.finditer(line))


def _next_block(text: str, pos: int, many: bool) -> str | None:
    """What a marker that ends its line points at: the next line, or the bullet list that
    starts there (its items joined by commas) when the manifold wants a list. A line with a
    marker of its own is read as that marker's span instead."""
    lines = _lines_after(text, pos)
    first = next(lines, None)
    if first is None or _has_marker(first):
        return None
    if not (_BULLET.match(first) or _NUMBERED.match(first)):
        return first
    block = [first]
    for line in lines:
        if len(block) > _LIST_ITEMS or not (_BULLET.match(line) or _NUMBERED.match(line)):
            break
        if _has_marker(line):
            break
        block.append(line)
    if len(block) > _LIST_ITEMS or (len(block) > 1 and not many):
        return None  # a long list, or a list where one value is wanted, is not the answer
    items = _list_items(block)
    return first if items is None else ", ".join(items)


def _last_line(text: str) -> str | None:
    """The last line that is neither blank nor an aside (a few asides passed over)."""
    end = len(text.rstrip())
    for _ in range(_ASIDES_SKIPPED + 1):
        if end == 0:
            return None
        start = text.rfind("\n", 0, end) + 1
        if not _is_aside(text, start, end):
            return text[start:end]
        end = len(text[:start].rstrip())
    return None


def _marker_spans(text: str, many: bool) -> Iterator[AnswerSpan]:
    """Rule 2b: the span of each answer marker, the last first."""
    words = [word.start() for word in _ANSWER_WORD.finditer(text)]
    following = len(text)  # where the marker after the current one starts
    line = (0, 0, False)  # (start, end, is a remark line) of the last line looked at
    tried = 0
    for hit in reversed(words):
        marker_end = _marker_end(text, hit)
        if marker_end is None:
            continue
        tried += 1
        if tried > _MARKERS_TRIED:
            return
        limit, following = following, hit
        newline = text.find("\n", marker_end, limit)
        end = newline if newline >= 0 else limit
        rest = text[marker_end:end]
        if not rest.strip(_DECORATION) and newline < 0 and limit < len(text):
            continue  # another marker follows on the same line
        if not line[0] <= hit < line[1]:
            start = text.rfind("\n", 0, hit) + 1
            stop = text.find("\n", hit)
            stop = len(text) if stop < 0 else stop
            line = (start, stop, bool(_REMARK_LINE.fullmatch(text, start, stop)))
        if line[2]:
            continue  # "(If pants counted, the answer is 17.)": a remark, not the answer
        if len(rest) > MAX_SPAN_CHARS:
            continue
        span = _clean(rest) or _clean(_next_block(text, end, many) or "")
        if span and len(span) <= MAX_SPAN_CHARS:
            yield AnswerSpan(span, True)


def answer_spans(output: str, *, many: bool = False) -> Iterator[AnswerSpan]:
    """The candidate answer spans of `output`, in the order rule 2 tries them.

    Args:
        output: the model's response.
        many: the manifold wants a list: take every ``\\boxed{}`` and a bullet list after a
            marker that ends its line.
    """
    text = strip_reasoning(output).replace("\r\n", "\n").replace("\r", "\n")
    if "\\boxed" in text:
        boxed = [span for m in _BOXED.finditer(text) if (span := _clean(m.group(1)))]
        if boxed:
            span = ", ".join(boxed) if many else boxed[-1]
            if len(span) <= MAX_SPAN_CHARS:
                yield AnswerSpan(span, True)
    yield from _marker_spans(text, many)
    last = _last_line(text)
    if last is None or len(last) > MAX_SPAN_CHARS:
        return
    bolds = _BOLD.findall(last)
    if bolds:
        first, second = bolds[-1]
        bold = _clean(first or second)
        if bold:
            yield AnswerSpan(bold, True)
    last = _clean(last)
    if last:
        yield AnswerSpan(last, False)


def find_answer(
    output: str, read: Callable[[AnswerSpan], T | None], *, many: bool = False
) -> T | None:
    """The first reading of a candidate span (rule 2) that `read` accepts, or None.

    Args:
        output: the model's response.
        read: the manifold's reading of a span: its value, or None when the span holds none.
        many: the manifold wants a list (see `answer_spans`).
    """
    for span in answer_spans(output, many=many):
        value = read(span)
        if value is not None:
            return value
    return None


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
_NUMERAL = r"(?<![\w.])-?\d+(?:\.\d+)?"
# Numerals; words (with digits glued on: "t4" is a label, not a number); single symbols.
_TOKEN = re.compile(rf"{_NUMERAL}|[a-z]+\d*|[^\w\s]")
_TOKEN_GROUPED = re.compile(
    rf"(?<![\w.])-?\d{{1,3}}(?:,\d{{3}})++(?!\d)|{_NUMERAL}|[a-z]+\d*|[^\w\s]"
)
_LONGEST_NUMERAL = 18
"""Digits beyond which a numeral reads as infinity: no target is that large."""

Token = int | float | str
"""A number, or a word or symbol of the text between numbers."""


def _numeral(token: str) -> int | float:
    whole, _, fraction = token.replace(",", "").partition(".")
    if len(whole.lstrip("-")) > _LONGEST_NUMERAL:
        return -math.inf if whole.startswith("-") else math.inf
    if not fraction.strip("0"):
        return int(whole)  # "7.0" is 7
    value = float(f"{whole}.{fraction[:_LONGEST_NUMERAL]}")
    # "14.000000000000000001" is not 14, however close the float
    return math.nextafter(value, math.inf) if value.is_integer() else value


def number_tokens(text: str, *, thousands_separators: bool = False) -> list[Token]:
    """`text` as numbers (numerals and English number words) and the words and symbols between
    them, in order. Inside a number written in words, "and" and hyphens belong to the number.

    Args:
        text: the text to scan.
        thousands_separators: read "1,234" as one number (else as 1 and 234, which a
            comma-separated list of integers needs).
    """
    text = text.lower().replace("−", "-").replace("–", "-")
    pattern = _TOKEN_GROUPED if thousands_separators else _TOKEN
    tokens: list[Token] = []
    total = current = 0
    in_words = False

    def flush() -> None:
        nonlocal total, current, in_words
        if in_words:
            tokens.append(total + current)
        total = current = 0
        in_words = False

    for token in pattern.findall(text):
        if token[0].isdigit() or (token[0] == "-" and len(token) > 1):
            flush()
            tokens.append(_numeral(token))
        elif token in _WORD_VALUES:
            value = _WORD_VALUES[token]
            if in_words and current % 10 == 0 and current > 0 and value < 10:
                current += value  # "twenty" "one"
            elif in_words and current and value:
                flush()  # "three four": two numbers
                current, in_words = value, True
            else:
                current += value
                in_words = True
        elif token in _SCALES and in_words:
            scale = _SCALES[token]
            if scale == 100:
                current = (current or 1) * 100
            else:
                total += (current or 1) * scale
                current = 0
        elif in_words and (token == "and" or not token[0].isalpha()):
            continue  # "one hundred and five", "twenty-one"
        else:
            flush()
            tokens.append(token)
    flush()
    return tokens


def parse_numbers(
    text: str, *, thousands_separators: bool = False, skip_negated: bool = False
) -> list[int | float]:
    """Every number written in `text`, in order: numerals and English number words.

    "twenty-one" -> 21, "one hundred and five" -> 105, "-3" -> -3, "7.0" -> 7, "7.5" -> 7.5.

    Args:
        text: the text to scan.
        thousands_separators: read "1,234" as one number (else as 1 and 234, which a
            comma-separated list of integers needs).
        skip_negated: leave out a number that directly follows "not" ("17, not 14").
    """
    numbers: list[int | float] = []
    negated = False
    for token in number_tokens(text, thousands_separators=thousands_separators):
        if isinstance(token, str):
            negated = token == "not" or (negated and not token[0].isalpha())
        elif not (skip_negated and negated):
            numbers.append(token)
    return numbers


_RUN_JOINERS = frozenset({"and", "then"})
_RUN_BREAKERS = frozenset("+=×÷^")


def number_runs(text: str) -> list[list[int | float]]:
    """The runs of numbers in `text` that no word interrupts, in order: "6, 12 and 18" is one
    run; "6 12 18, adding 6 each time" is two. "and", "then" and punctuation join; arithmetic
    ("+", "=") breaks. A run that directly follows "not" is left out.
    """
    runs: list[list[int | float]] = []
    run: list[int | float] = []
    negated = last_word_not = False

    def close() -> None:
        nonlocal run
        if run and not negated:
            runs.append(run)
        run = []

    for token in number_tokens(text):
        if not isinstance(token, str):
            if not run:
                negated = last_word_not
            run.append(token)
        elif token[0].isalpha():
            if token not in _RUN_JOINERS:
                close()
                last_word_not = token == "not"
        elif token in _RUN_BREAKERS:
            close()
            last_word_not = False
    close()
    return runs


_HEDGE_FILLERS = frozenset({"(", ")", ",", "maybe", "perhaps", "possibly", "probably", "even"})


def is_hedge(
    text: str, *, thousands_separators: bool = False, ranges: bool = False, width: int = 1
) -> bool:
    """Whether `text` offers two different answers as alternatives: "14 or 15", "14 (or maybe
    15)", "between 14 and 15"; with `ranges`, also "14-15" and "14 to 15".

    Args:
        text: the span.
        thousands_separators: as for `parse_numbers`.
        ranges: a dash or "to" between an increasing pair is a hedge (counts, not lists).
        width: how many numbers an answer holds: around "or", up to that many numbers on each
            side are compared ("1 2 1 or 1 1 1" is a hedge between two lists).
    """
    numbers: list[int | float] = []
    gaps: list[list[str]] = []  # gaps[i]: the words and symbols just before numbers[i]
    gap: list[str] = []
    for token in number_tokens(text, thousands_separators=thousands_separators):
        if isinstance(token, str):
            gap.append(token)
        else:
            numbers.append(token)
            gaps.append(gap)
            gap = []
    for i in range(1, len(numbers)):
        words = [t for t in gaps[i] if t not in _HEDGE_FILLERS]
        if words == ["or"]:
            k = min(width, i, len(numbers) - i)
            if numbers[i - k : i] != numbers[i : i + k]:
                return True
            continue
        ranged = ranges and words in (["to"], ["-"]) and numbers[i - 1] < numbers[i]
        between = words in ([], ["and"]) and gaps[i - 1][-1:] == ["between"]
        if (ranged or between) and numbers[i] != numbers[i - 1]:
            return True
    return False


# ---------------------------------------------------------------------------- phrases


@lru_cache(maxsize=8192)
def normalise_phrase(text: str) -> str:
    """Lower case, "&" as "and", punctuation and markdown to spaces, articles dropped, spaces
    collapsed. (Cached: graders normalise the same item names for every response.)"""
    words = re.sub(r"[^0-9a-z]+", " ", text.lower().replace("&", " and ")).split()
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
            spans.append((start, -(start + len(needle)), key))
            start = haystack.find(needle, start + 1)
    # By start, the longest first: a span lies inside an earlier one exactly when it ends no
    # later than the furthest end seen so far (two aliases never share both ends).
    order: list[str] = []
    furthest = 0
    for _start, negative_end, key in sorted(spans):
        if -negative_end <= furthest:
            continue
        furthest = -negative_end
        if key not in order:
            order.append(key)
    return order
