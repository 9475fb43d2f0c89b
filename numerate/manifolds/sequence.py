"""Sequence Pattern Recognition: continue a sequence under a base rule and interference rules.

Spec: shared/specs/sequence.md. Pure code: no Prefect, no I/O.

Rules are applied in the spec's stated order: base, then skip rules, then modulo rules, then
conditions, each group in listed order. The spec's third worked example disagrees with that
order; DESIGN.md settles it in favour of the order (its terms are 17 2 6 20).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from enum import IntFlag
from functools import partial
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from numerate.kernel.inputs import Whole
from numerate.manifolds.common import CaseBase, ParamsBase, canonical_params, case_rng
from numerate.manifolds.grading import (
    AnswerSpan,
    Grade,
    Outcome,
    drop_parenthesised,
    find_answer,
    is_hedge,
    number_runs,
)

NAME = "sequence"
TERM_LIMIT = 10**6
"""A case with a term of larger magnitude is drawn again, so a person can check it."""
MAX_ATTEMPTS = 10_000


class RuleCategory(IntFlag):
    """Interference rule categories, as bits of `rule_enable`."""

    SKIP = 1
    MODULO = 2
    CONDITIONS = 4


RuleSpec = dict[str, Any]
"""{"category": ..., "kind": ..., **integer parameters}."""

# kind -> (category, parameter sampler, English text)
_Sampler = Callable[[random.Random], dict[str, int]]


def _odd_position_amount(rng: random.Random) -> dict[str, int]:
    return {"amount": rng.choice((-3, -2, -1, 1, 2, 3))}


def _odd_position_text(amount: int) -> str:
    verb = f"add {amount}" if amount > 0 else f"subtract {-amount}"
    return f"If the new term's position is odd, {verb}"


BASE_RULES: dict[str, tuple[_Sampler, Callable[..., str]]] = {
    "arithmetic": (
        lambda r: {"step": r.randint(2, 8)},
        lambda step: f"Add {step} to the previous term",
    ),
    "geometric": (
        lambda r: {"multiplier": r.randint(2, 4)},
        lambda multiplier: f"Multiply the previous term by {multiplier}",
    ),
    "square": (lambda r: {}, lambda: "Square the previous term"),
    "fibonacci": (
        lambda r: {"offset": r.randint(1, 3)},
        lambda offset: f"Add the previous two terms, then subtract {offset}",
    ),
}

INTERFERENCE_RULES: dict[str, tuple[RuleCategory, _Sampler, Callable[..., str]]] = {
    "divisible": (
        RuleCategory.SKIP,
        lambda r: {"divisor": r.randint(3, 9), "amount": r.randint(1, 5)},
        lambda divisor, amount: (
            f"If the result is divisible by {divisor}, replace it with the previous term "
            f"plus {amount}"
        ),
    ),
    "contains_digit": (
        RuleCategory.SKIP,
        lambda r: {"digit": r.randint(0, 9), "amount": r.randint(2, 9)},
        lambda digit, amount: f"If the result contains the digit {digit}, add {amount}",
    ),
    "prime": (
        RuleCategory.SKIP,
        lambda r: {"factor": r.randint(2, 3)},
        lambda factor: f"If the result is a prime number, multiply it by {factor}",
    ),
    "every_nth": (
        RuleCategory.MODULO,
        lambda r: {"n": r.randint(2, 4), "amount": r.randint(1, 5)},
        lambda n, amount: f"If the new term's position is a multiple of {n}, add {amount}",
    ),
    "odd_position": (RuleCategory.MODULO, _odd_position_amount, _odd_position_text),
    "previous_even": (
        RuleCategory.CONDITIONS,
        lambda r: {"amount": r.randint(1, 5)},
        lambda amount: f"If the previous term is even, add {amount}",
    ),
    "previous_odd": (
        RuleCategory.CONDITIONS,
        lambda r: {"factor": r.randint(2, 3)},
        lambda factor: f"If the previous term is odd, multiply the result by {factor}",
    ),
    "threshold_wrap": (
        RuleCategory.CONDITIONS,
        lambda r: {"threshold": r.randint(20, 99), "wrap_to": r.randint(1, 9)},
        lambda threshold, wrap_to: (
            f"If the result is greater than {threshold}, replace it with {wrap_to}"
        ),
    ),
    "digit_sum": (
        RuleCategory.CONDITIONS,
        lambda r: {"limit": r.randint(8, 15), "amount": r.randint(2, 9)},
        lambda limit, amount: (
            f"If the sum of the digits of the result is greater than {limit}, subtract {amount}"
        ),
    ),
}

_CATEGORY_NAMES = {
    RuleCategory.SKIP: "skip",
    RuleCategory.MODULO: "modulo",
    RuleCategory.CONDITIONS: "conditions",
}
_CATEGORY_ORDER = {"base": 0, "skip": 1, "modulo": 2, "conditions": 3}
# Largest starting value per base rule: keeps fast-growing rules within TERM_LIMIT more often.
_START_MAX = {"arithmetic": 20, "fibonacci": 20, "geometric": 10, "square": 5}


def kinds_enabled(rule_enable: int) -> list[str]:
    """Interference rule kinds whose category bit is set in `rule_enable`."""
    return [k for k, (cat, _, _) in INTERFERENCE_RULES.items() if cat & rule_enable]


class SequenceGenerationParams(ParamsBase):
    """Parameters of a Sequence Pattern Recognition grid point."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )

    seq_length: Whole = Field(3, ge=1, le=20)
    """Number of terms the model must generate."""
    num_rules: Whole = Field(1, ge=1, le=len(INTERFERENCE_RULES))
    """Number of interference rules (besides the base rule), each of a different kind."""
    rule_enable: Whole = Field(7, ge=1, le=7)
    """Bitmask of enabled interference categories: SKIP=1, MODULO=2, CONDITIONS=4."""
    start_length: Whole = Field(3, ge=2, le=8)
    """Number of terms in the starting sequence (numerate's addition; the spec leaves it open)."""

    @model_validator(mode="after")
    def _enough_kinds(self) -> SequenceGenerationParams:
        available = len(kinds_enabled(self.rule_enable))
        if self.num_rules > available:
            raise ValueError(
                f"num_rules={self.num_rules} exceeds the {available} distinct rule kinds that "
                f"rule_enable={self.rule_enable} allows"
            )
        return self


class SequenceCase(CaseBase):
    """One Sequence Pattern Recognition case."""

    starting_sequence: list[int]
    """The terms shown to the model (random: a red herring)."""
    rules: list[str]
    """Rules in English, base rule first."""
    rule_specs: list[RuleSpec]
    """The rules as data, in the order of `rules`."""
    expected_next_terms: list[int]
    """The terms the model must give."""
    seq_length: int
    """Number of terms to give."""
    depth: int
    """Number of rules: base plus interference."""


_WITNESSES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def is_prime(n: int) -> bool:
    """Primality; deterministic Miller-Rabin, exact for every n below 3.3 * 10^24."""
    if n < 2:
        return False
    for p in _WITNESSES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in _WITNESSES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _digits(n: int) -> str:
    return str(abs(n))


def next_term(rule_specs: Sequence[RuleSpec], terms: Sequence[int]) -> int:
    """The term after `terms` under the rules (position = len(terms) + 1)."""
    position = len(terms) + 1
    prev = terms[-1]
    base, *interference = rule_specs
    kind = base["kind"]
    if kind == "arithmetic":
        result = prev + base["step"]
    elif kind == "geometric":
        result = prev * base["multiplier"]
    elif kind == "square":
        result = prev * prev
    elif kind == "fibonacci":
        result = prev + terms[-2] - base["offset"]
    else:
        raise ValueError(f"unknown base rule kind: {kind!r}")
    for rule in interference:
        kind = rule["kind"]
        if kind == "divisible":
            if result % rule["divisor"] == 0:
                result = prev + rule["amount"]
        elif kind == "contains_digit":
            if str(rule["digit"]) in _digits(result):
                result += rule["amount"]
        elif kind == "prime":
            if is_prime(result):
                result *= rule["factor"]
        elif kind == "every_nth":
            if position % rule["n"] == 0:
                result += rule["amount"]
        elif kind == "odd_position":
            if position % 2 == 1:
                result += rule["amount"]
        elif kind == "previous_even":
            if prev % 2 == 0:
                result += rule["amount"]
        elif kind == "previous_odd":
            if prev % 2 == 1:
                result *= rule["factor"]
        elif kind == "threshold_wrap":
            if result > rule["threshold"]:
                result = rule["wrap_to"]
        elif kind == "digit_sum":
            if sum(map(int, _digits(result))) > rule["limit"]:
                result -= rule["amount"]
        else:
            raise ValueError(f"unknown interference rule kind: {kind!r}")
    return result


def continue_sequence(
    rule_specs: Sequence[RuleSpec], start: Sequence[int], n: int, limit: int | None = None
) -> list[int] | None:
    """The `n` terms that follow `start` under the rules.

    With `limit`, None as soon as a term's magnitude exceeds it.
    """
    terms = list(start)
    for _ in range(n):
        term = next_term(rule_specs, terms)
        if limit is not None and abs(term) > limit:
            return None
        terms.append(term)
    return terms[len(start) :]


def rule_text(spec: RuleSpec) -> str:
    """The English statement of a rule."""
    params = {k: v for k, v in spec.items() if k not in ("category", "kind")}
    if spec["category"] == "base":
        return BASE_RULES[spec["kind"]][1](**params)
    return INTERFERENCE_RULES[spec["kind"]][2](**params)


def _draw_rules(params: SequenceGenerationParams, rng: random.Random) -> list[RuleSpec]:
    base_kind = rng.choice(list(BASE_RULES))
    specs: list[RuleSpec] = [
        {"category": "base", "kind": base_kind, **BASE_RULES[base_kind][0](rng)}
    ]
    remaining = kinds_enabled(params.rule_enable)
    chosen: list[RuleSpec] = []
    for _ in range(params.num_rules):
        # A category first, uniformly among those with a kind left, then a kind within it:
        # CONDITIONS has four kinds and would otherwise dominate.
        categories = sorted({INTERFERENCE_RULES[k][0] for k in remaining})
        category = rng.choice(categories)
        kind = rng.choice([k for k in remaining if INTERFERENCE_RULES[k][0] == category])
        remaining.remove(kind)
        chosen.append(
            {
                "category": _CATEGORY_NAMES[category],
                "kind": kind,
                **INTERFERENCE_RULES[kind][1](rng),
            }
        )
    chosen.sort(key=lambda spec: _CATEGORY_ORDER[spec["category"]])  # stable within a group
    return specs + chosen


def _prompt(start: list[int], rules: list[str], n: int) -> str:
    listed = "\n".join(f"{i}. {text}" for i, text in enumerate(rules, start=1))
    terms = " ".join(f"t{i}" for i in range(1, n + 1))
    noun = "term" if n == 1 else "terms"
    return (
        f"Starting sequence: {' '.join(map(str, start))}\n\n"
        "Each new term is computed from the terms before it. Rule 1 gives a result; then each "
        "later rule, in order, changes that result when its condition holds. Positions count "
        "from 1 at the first term of the starting sequence.\n\n"
        f"Rules:\n{listed}\n\n"
        f"Return the next {n} {noun}.\n\n"
        f'Give your final answer on the last line, in the form "Answer: {terms}" '
        f"({n} whole {'number' if n == 1 else 'numbers separated by spaces'})."
    )


def generate(params: SequenceGenerationParams, seed: int, index: int) -> SequenceCase:
    """Case `index` of the grid point (params, seed): a pure function of its arguments.

    A draw whose terms leave [-10^6, 10^6] is replaced by the next draw of the same generator.
    """
    rng = case_rng(seed, index)
    for _ in range(MAX_ATTEMPTS):
        specs = _draw_rules(params, rng)
        high = _START_MAX[specs[0]["kind"]]
        start = [rng.randint(1, high) for _ in range(params.start_length)]
        terms = continue_sequence(specs, start, params.seq_length, limit=TERM_LIMIT)
        if terms is not None:
            break
    else:  # pragma: no cover - needs 10,000 draws in a row to exceed the limit
        raise RuntimeError(f"no sequence within {TERM_LIMIT} after {MAX_ATTEMPTS} draws")
    rules = [rule_text(spec) for spec in specs]
    return SequenceCase(
        manifold=NAME,
        index=index,
        seed=seed,
        params=canonical_params(params),
        input=_prompt(start, rules, params.seq_length),
        target=" ".join(map(str, terms)),
        starting_sequence=start,
        rules=rules,
        rule_specs=specs,
        expected_next_terms=terms,
        seq_length=params.seq_length,
        depth=len(specs),
    )


def chance_level(params: SequenceGenerationParams) -> float:
    """A uniform guess over unbounded integer sequences is right with probability 0."""
    return 0.0


def guess(case: SequenceCase, rng: random.Random) -> str:
    """A guess: `seq_length` integers drawn uniformly from the allowed range of terms."""
    return " ".join(str(rng.randint(-TERM_LIMIT, TERM_LIMIT)) for _ in range(case.seq_length))


# Labels before the terms, not terms: "t4 = 6", "a_{5} = 12", "Term 6: 18".
_LABEL = re.compile(r"\b(?:[a-z]_?\{?\d+\}?|(?:term|position)[ \t]+\d+)[ \t]*[:=]", re.IGNORECASE)


def _read_terms(seq_length: int, span: AnswerSpan) -> list[int | float] | None:
    """The terms an answer span holds, or None."""
    if is_hedge(span.text, width=seq_length):
        return None  # "6 12 18 or 6 12 24"
    # A parenthesised remark holds words: "(each term adds 3)"; "(11, 14, 17)" is the answer.
    text = _LABEL.sub(" ", drop_parenthesised(span.text, remarks_only=True))
    runs = number_runs(text)
    numbers = [term for run in runs for term in run]
    if not numbers or (not span.explicit and len(numbers) != seq_length):
        return None
    long_enough = [run for run in runs if len(run) >= seq_length]
    return (long_enough[-1] if long_enough else numbers)[-seq_length:]


def parse_answer(case: SequenceCase, output: str) -> list[int | float] | None:
    """The terms a response gives, or None.

    Every ``\\boxed{}`` counts, and a bullet list after "Answer:". Parenthesised remarks (with
    words in them) and labels ("t4 =") are dropped. The terms are read from the last run of
    numbers that no word interrupts and that is long enough ("6 12 18, adding 6 each time");
    when it holds more numbers than asked for, the last `seq_length` count ("the next 3 terms
    are 11, 14, 17", "2 5 8 11 14 17"). A run after "not" does not count; alternatives
    ("... or ...") are no answer. A bare last line counts only when it holds exactly
    `seq_length` numbers.
    """
    return find_answer(output, partial(_read_terms, case.seq_length), many=True)


def grade(case: SequenceCase, output: str) -> Grade:
    """Judge a response to a Sequence case."""
    answer = parse_answer(case, output)
    if answer is None:
        return Grade(Outcome.UNPARSED, None)
    correct = answer == case.expected_next_terms
    return Grade(Outcome.CORRECT if correct else Outcome.WRONG, " ".join(map(str, answer)))


# What the registry reads (manifolds.registry.Manifold.from_module).
DESCRIPTION = "Sequence Pattern Recognition: continue a sequence under interfering rules"
PARAMS = SequenceGenerationParams
CASE = SequenceCase


# The trivial strategy a benchmark must beat (baseline:heuristic): ignore the rules.
HEURISTIC = "continue the last difference of the shown terms"


def heuristic_prior(reference: list[SequenceCase]) -> None:
    """The strategy learns nothing from other cases."""
    return None


def heuristic(case: SequenceCase, prior: None) -> str:
    """The answer of the trivial strategy: the shown terms continued by their last difference
    (a constant sequence when only one term is shown)."""
    shown = case.starting_sequence
    step = shown[-1] - shown[-2] if len(shown) > 1 else 0
    return " ".join(str(shown[-1] + step * k) for k in range(1, case.seq_length + 1))
