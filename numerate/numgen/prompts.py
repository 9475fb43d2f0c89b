"""NumGen prompts: "An image with {n} {object}", every number equally represented.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from numerate.kernel.errors import ConfigError, describe_validation_error, printable
from numerate.kernel.inputs import Seed, Whole

TEMPLATE = "An image with {n} {object}"


# The reference's eleven objects, plural -> singular.
def unknown_object(name: str) -> str:
    """Why `name` cannot be an object without its singular, naming those known."""
    return (
        f"object {name!r} is none of the objects numerate knows ({', '.join(OBJECTS)}); "
        f"another needs its singular form in a config file: prompts.singulars: {{{name!r}: ...}}"
    )


OBJECTS: dict[str, str] = {
    "apples": "apple",
    "people": "person",
    "human faces": "human face",
    "dots": "dot",
    "butterflies": "butterfly",
    "triangles": "triangle",
    "dogs": "dog",
    "cars": "car",
    "pencils": "pencil",
    "shoes": "shoe",
    "guitars": "guitar",
}

ExportFormat = Literal["json", "jsonl", "txt"]


class PromptSpec(BaseModel):
    """What to generate: the numbers, the objects, how many prompts per number, the seed."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # misspelt: an error

    n_min: Whole = Field(1, ge=1, le=19)
    """Smallest target numerosity."""
    n_max: Whole = Field(10, ge=1, le=19)
    """Largest target numerosity (the confusion matrix's generated axis stops at 20+)."""
    per_number: Whole = Field(10, ge=1, le=100_000)
    """Prompts for each number: every number is equally represented."""
    objects: list[str] = Field(default_factory=lambda: list(OBJECTS))
    """Objects, plural as in the prompt; unknown objects need a `singulars` entry."""
    singulars: dict[str, str] = Field(default_factory=dict)
    """Singular forms of objects outside the built-in list (used for n = 1)."""
    seed: Seed = 0
    """Seed of the object draw and of every image's generator seed."""

    @model_validator(mode="after")
    def _check(self) -> PromptSpec:
        if self.n_min > self.n_max:
            raise ValueError(f"n_min = {self.n_min} is larger than n_max = {self.n_max}")
        if not self.objects:
            raise ValueError("objects is empty: name at least one object")
        folded = [name.casefold() for name in self.objects]
        for index, name in enumerate(self.objects):
            if not name.strip():
                many = len(self.objects)
                raise ValueError(f"objects: object {index + 1} of {many} is an empty name")
            if folded.count(name.casefold()) > 1:  # its prompts would be dealt twice
                twice = ", ".join(repr(o) for o in self.objects if o.casefold() == name.casefold())
                raise ValueError(f"objects: {name!r} is named twice ({twice})")
            for text in (name, self.singulars.get(name, "")):  # stored, shown, in the prompt
                if printable(text) != text or text != text.strip():  # a bidi control too
                    raise ValueError(
                        f"object {text!r}: a name with a control character (a newline?), a "
                        "bidi control or spaces around it"
                    )
            if name in self.singulars and not self.singulars[name].strip():
                raise ValueError(f"singulars: the singular of {name!r} is empty")
            if name not in OBJECTS and name not in self.singulars:
                raise ValueError(unknown_object(name))
        unasked = sorted(set(self.singulars) - set(self.objects))
        if unasked:  # a typo in its name, or an object left out: its singular is never used
            raise ValueError(
                f"singulars: {unasked[0]!r} is not one of the objects asked "
                f"({', '.join(self.objects)})"
            )
        return self

    def singular(self, name: str) -> str:
        return self.singulars.get(name) or OBJECTS[name]


class Prompt(BaseModel):
    """One prompt and everything needed to reproduce its image."""

    prompt_id: str
    """Stable id: a hash of (text, index within its number, seed)."""
    index: int
    """Position in the prompt list."""
    target: int
    """The number asked for."""
    object: str
    """The object, plural form ("apples")."""
    text: str
    """The prompt sent to the generator."""
    image_seed: int
    """Seed of this image's own random generator."""


def prompt_text(n: int, plural: str, singular: str) -> str:
    """The prompt for n objects: singular for n = 1."""
    return TEMPLATE.format(n=n, object=singular if n == 1 else plural)


def make_prompts(spec: PromptSpec) -> list[Prompt]:
    """Every prompt of `spec`, in a list (`iter_prompts`)."""
    return list(iter_prompts(spec))


def iter_prompts(spec: PromptSpec) -> Iterator[Prompt]:
    """Every number n_min..n_max `per_number` times; objects are dealt round-robin from a seeded
    shuffle so that each number sees every object as evenly as the counts allow. The result is
    interleaved (1, 2, ..., 10, 1, 2, ...) so that a partial run still covers every number.
    One at a time: an export of a million prompts holds none but the one it writes.

    Args:
        spec: the prompt specification.
    """
    rng = random.Random(spec.seed)
    numbers = range(spec.n_min, spec.n_max + 1)
    dealt: dict[int, list[str]] = {}
    for n in numbers:
        deck: list[str] = []
        while len(deck) < spec.per_number:
            round_ = list(spec.objects)
            rng.shuffle(round_)
            deck.extend(round_)
        dealt[n] = deck[: spec.per_number]
    index = 0
    for repeat in range(spec.per_number):
        for n in numbers:
            plural = dealt[n][repeat]
            text = prompt_text(n, plural, spec.singular(plural))
            digest = hashlib.blake2b(
                f"{text}\x00{repeat}\x00{spec.seed}".encode(), digest_size=8
            ).digest()
            yield Prompt(
                prompt_id=digest.hex(),
                index=index,
                target=n,
                object=plural,
                text=text,
                image_seed=int.from_bytes(digest[:4], "big"),
            )
            index += 1


def prompt_count(spec: PromptSpec) -> int:
    """How many prompts `spec` makes."""
    return spec.per_number * (spec.n_max - spec.n_min + 1)


def prompt_chunks(prompts: Iterable[Prompt], fmt: ExportFormat) -> Iterator[str]:
    """Prompts as a JSON array (as `json.dumps(..., indent=2)` writes it), JSON Lines (one
    object a line) or plain text (one prompt a line), a prompt at a time."""
    if fmt not in ("json", "jsonl", "txt"):
        raise ValueError(f"format must be json, jsonl or txt, got {fmt!r}")
    if fmt == "json":
        yield "["
        i = -1
        for i, p in enumerate(prompts):
            item = json.dumps(p.model_dump(), indent=2).replace("\n", "\n  ")
            yield f"{',' if i else ''}\n  {item}"
        yield "]\n" if i < 0 else "\n]\n"
        return
    for p in prompts:
        yield (p.model_dump_json() if fmt == "jsonl" else p.text) + "\n"


def spec_of_options(values: dict[str, Any], options: Mapping[str, str]) -> PromptSpec:
    """The prompt spec of command-line values (`options`: {field: option}); ConfigError
    naming the option of a bad value, or an object numerate knows no singular of."""
    unknown = [name for name in values.get("objects") or [] if name not in OBJECTS]
    if unknown:  # no config here to give a singular in
        raise ConfigError(
            f"--object {unknown[0]!r} is none of the objects numerate knows "
            f"({', '.join(OBJECTS)}); `numgen run --config` takes others, with their singular "
            "form"
        )
    try:
        return PromptSpec(**{key: value for key, value in values.items() if value is not None})
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, "prompts", options)) from None
