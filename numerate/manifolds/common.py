"""Pure helpers shared by the manifolds: seeding, anchor markers and English formatting.

Nothing here imports Prefect or does I/O.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from numerate.kernel.inputs import Seed, Whole


class AnchorFormat(StrEnum):
    """Organisational markers placed before each listed statement."""

    NONE = "NONE"
    NUMERIC = "NUMERIC"
    ASCII = "ASCII"
    ALPHA = "ALPHA"
    ROMAN = "ROMAN"
    SKIP_2 = "SKIP_2"
    REVERSE = "REVERSE"
    HEX = "HEX"
    ELEMENTS = "ELEMENTS"


# Periodic table, in order; ELEMENTS anchors cycle through it.
ELEMENT_SYMBOLS: tuple[str, ...] = tuple(
    """H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se
    Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy
    Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf
    Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og""".split()
)

_ROMAN = (
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
)  # fmt: skip

# Printable ASCII from "A" to "~": the ASCII anchor walks it and wraps.
_ASCII_FIRST, _ASCII_LAST = ord("A"), ord("~")


def roman(n: int) -> str:
    """Roman numeral for n >= 1."""
    if n < 1:
        raise ValueError(f"roman numerals start at 1, got n={n}")
    out = []
    for value, symbol in _ROMAN:
        count, n = divmod(n, value)
        out.append(symbol * count)
    return "".join(out)


def anchor_label(anchor: AnchorFormat, position: int, total: int) -> str:
    """The marker of the `position`-th (0-based) of `total` anchored statements.

    Args:
        anchor: the format.
        position: 0-based position of the statement.
        total: number of anchored statements (REVERSE counts down from it).
    """
    n = position + 1
    if anchor is AnchorFormat.NONE:
        return ""
    if anchor is AnchorFormat.NUMERIC:
        return str(n)
    if anchor is AnchorFormat.ASCII:
        return chr(_ASCII_FIRST + position % (_ASCII_LAST - _ASCII_FIRST + 1))
    if anchor is AnchorFormat.ALPHA:
        return chr(ord("A") + position % 26)
    if anchor is AnchorFormat.ROMAN:
        return roman(n)
    if anchor is AnchorFormat.SKIP_2:
        return str(2 * n)
    if anchor is AnchorFormat.REVERSE:
        return str(total - position)
    if anchor is AnchorFormat.HEX:
        return f"0x{n:02X}"
    if anchor is AnchorFormat.ELEMENTS:
        return ELEMENT_SYMBOLS[position % len(ELEMENT_SYMBOLS)]
    raise ValueError(f"unknown anchor format: {anchor!r}")


# ---------------------------------------------------------------------------- seeding


def stable_hash(*parts: Any) -> int:
    """A 63-bit integer hash of JSON-serialisable parts, identical across runs and machines."""
    payload = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return int.from_bytes(hashlib.blake2b(payload.encode(), digest_size=8).digest(), "big") >> 1


def canonical_params(params: BaseModel) -> dict[str, Any]:
    """The parameters that define a grid point: everything except `count`.

    `count` is left out so that a smaller count is a prefix of a larger one.
    """
    return params.model_dump(mode="json", exclude={"count"})


def point_seed(manifold: str, params: BaseModel, base_seed: int) -> int:
    """Seed of a grid point: a stable hash of (manifold, canonical parameters, base seed).

    Adding other grid points to a sweep never changes this point's seed.
    """
    return stable_hash("numerate.point", manifold, canonical_params(params), base_seed)


def case_rng(seed: int, index: int) -> random.Random:
    """The private random generator of case `index` of the grid point with `seed`."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


# ---------------------------------------------------------------------------- English

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()

# Words that start with a vowel letter but a consonant sound, and the reverse.
_CONSONANT_SOUND = ("uni", "use", "usu", "uten", "eu", "one", "once", "ukulele")
_VOWEL_SOUND = ("hour", "honest", "honor", "heir")
_VOWEL_SOUND_LETTERS = set("AEFHILMNORSX")  # initialisms read letter by letter: "an FM radio"


def indefinite_article(phrase: str) -> str:
    """'a' or 'an' for the phrase, by the sound of its first word."""
    word = phrase.split()[0]
    lower = word.lower()
    if word.isupper() and len(word) > 1:  # an initialism such as DVD or CD
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    if lower.startswith(_VOWEL_SOUND):
        return "an"
    if lower.startswith(_CONSONANT_SOUND):
        return "a"
    return "an" if lower[:1] in "aeiou" else "a"


def number_word(n: int) -> str:
    """English words for 0 <= n < 100 ("twenty-one")."""
    if not 0 <= n < 100:
        raise ValueError(f"number_word covers 0..99, got n={n}")
    if n < 20:
        return _UNITS[n]
    tens, units = divmod(n, 10)
    return _TENS[tens] + (f"-{_UNITS[units]}" if units else "")


def join_english(parts: Sequence[str], conjunction: str = "and") -> str:
    """'a', 'a and b', 'a, b, and c'."""
    if not parts:
        return ""
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return f"{parts[0]} {conjunction} {parts[1]}"
    return f"{', '.join(parts[:-1])}, {conjunction} {parts[-1]}"


def check_anchor_text(params: BaseModel) -> None:
    """ValueError when `anchor_prefix` or `anchor_suffix` is given (not its default) with
    anchor NONE: they shape markers there are none of, and would only change the cases' seed
    (a point seed hashes every parameter): the same cases under another name."""
    if getattr(params, "anchor", None) is not AnchorFormat.NONE:
        return
    fields = type(params).model_fields
    for name in ("anchor_prefix", "anchor_suffix"):
        if getattr(params, name) != fields[name].default:
            raise ValueError(
                f"{name} = {getattr(params, name)!r} with anchor NONE: it shapes the markers, "
                "and there are none (set an anchor, or leave it out)"
            )


class ParamsBase(BaseModel):
    """Parameters every grid point has, whatever its manifold."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )

    count: Whole = Field(10, gt=0, le=1_000_000)
    """Number of test cases to generate."""


class CaseBase(BaseModel):
    """Fields every generated case carries, whatever its manifold."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    manifold: str
    """Registry name of the manifold that generated the case."""
    index: Whole = Field(ge=0, lt=2**63)
    """Position of the case within its grid point (0-based; stored as a BIGINT)."""
    seed: Seed
    """Seed of the grid point; (manifold, params, seed, index) reproduce the case."""
    params: dict[str, Any]
    """The generation parameters, as JSON."""
    input: str
    """The prompt sent to the model."""
    target: str
    """The correct answer, as text."""
