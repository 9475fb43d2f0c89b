"""The manifold registry: names -> manifolds. Pure code."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from numerate.kernel.errors import shorten
from numerate.manifolds import objects, sequence, shuffle
from numerate.manifolds.common import CaseBase, ParamsBase, point_seed, stable_hash
from numerate.manifolds.grading import Grade, Outcome

HEURISTIC_SAMPLE = 200
"""Reference cases per grid point for the trivial strategy: learnt on one set, measured on
another (standard error of its accuracy at most 0.0354, the square root of 0.25 / 200)."""


class UnknownManifoldError(KeyError):
    """A manifold name that the registry does not know."""

    def __str__(self) -> str:
        return str(self.args[0])


class DuplicateManifoldError(ValueError):
    """A second manifold registered under a name already taken."""


P = TypeVar("P", bound=ParamsBase)
C = TypeVar("C", bound=CaseBase)
Prior = TypeVar("Prior")


class ManifoldModule(Protocol[P, C, Prior]):
    """The contract of a manifold's module (docs/architecture.md, "Architecture"), checked by
    mypy where the module is registered: its parameters `P`, its cases `C`, and what its trivial
    strategy learns of a grid point, `Prior`."""

    NAME: str
    DESCRIPTION: str
    HEURISTIC: str
    """What the trivial strategy does, in words."""

    @property
    def PARAMS(self) -> type[P]: ...

    @property
    def CASE(self) -> type[C]: ...

    def generate(self, params: P, seed: int, index: int) -> C: ...

    def grade(self, case: C, output: str) -> Grade: ...

    def chance_level(self, params: P) -> float: ...

    def guess(self, case: C, rng: random.Random) -> str: ...

    def heuristic_prior(self, reference: list[C]) -> Prior: ...

    def heuristic(self, case: C, prior: Prior) -> str: ...


@dataclass(frozen=True)
class Manifold(Generic[P, C, Prior]):
    """Everything the pipeline needs to know about one test manifold."""

    name: str
    params_model: type[P]
    case_model: type[C]
    generate: Callable[[P, int, int], C]
    """generate(params, seed, index) -> case."""
    grade: Callable[[C, str], Grade]
    """grade(case, model_output) -> Grade."""
    chance_level: Callable[[P], float]
    """chance_level(params) -> probability that a uniform guess is right."""
    guess: Callable[[C, random.Random], str]
    """guess(case, rng) -> a uniform guess over the case's response space (a baseline)."""
    heuristic_prior: Callable[[list[C]], Prior]
    """heuristic_prior(reference cases of a grid point) -> what the trivial strategy learns."""
    heuristic: Callable[[C, Prior], str]
    """heuristic(case, prior) -> the trivial strategy's answer (baseline:heuristic)."""
    heuristic_description: str
    description: str

    @classmethod
    def from_module(cls, module: ManifoldModule[P, C, Prior]) -> Manifold[P, C, Prior]:
        """The manifold a module defines (ManifoldModule)."""
        return cls(
            name=module.NAME,
            params_model=module.PARAMS,
            case_model=module.CASE,
            generate=module.generate,
            grade=module.grade,
            chance_level=module.chance_level,
            guess=module.guess,
            heuristic_prior=module.heuristic_prior,
            heuristic=module.heuristic,
            heuristic_description=module.HEURISTIC,
            description=module.DESCRIPTION,
        )

    def params(self, **values: Any) -> P:
        """Validated parameters; raises pydantic.ValidationError naming the bad field. A zero
        written `-0.0` is 0.0: the same value, so the same grid point and cases (its seed,
        a hash of the parameters as JSON, told them apart)."""
        return self.params_model(**{
            name: 0.0 if isinstance(value, float) and value == 0.0 else value
            for name, value in values.items()
        })  # fmt: skip

    def cases(self, params: P, base_seed: int) -> Iterator[C]:
        """The `params.count` cases of a grid point, in index order."""
        seed = point_seed(self.name, params, base_seed)
        for index in range(params.count):
            yield self.generate(params, seed, index)

    def reference_cases(self, params: P, seed: int, part: int) -> list[C]:
        """HEURISTIC_SAMPLE cases of the grid point with `seed` that no sweep asks (their own
        seed): part 0 teaches the trivial strategy, part 1 measures it."""
        reference_seed = stable_hash("numerate.heuristic", self.name, seed, part)
        return [self.generate(params, reference_seed, i) for i in range(HEURISTIC_SAMPLE)]

    def heuristic_prior_of(self, params: P, seed: int) -> Prior:
        """What the trivial strategy knows of the grid point (learnt from reference cases)."""
        return self.heuristic_prior(self.reference_cases(params, seed, 0))

    def heuristic_level(self, params: P, seed: int) -> float:
        """The trivial strategy's accuracy at the grid point, measured on reference cases
        other than those it learnt from: the floor that no reasoning is needed to reach."""
        prior = self.heuristic_prior_of(params, seed)
        cases = self.reference_cases(params, seed, 1)
        right = sum(
            self.grade(case, f"Answer: {self.heuristic(case, prior)}").outcome is Outcome.CORRECT
            for case in cases
        )
        return right / len(cases)


AnyManifold = Manifold[Any, Any, Any]
"""A registered manifold, whichever its parameters and cases."""

_REGISTRY: dict[str, AnyManifold] = {}


def register(manifold: AnyManifold) -> AnyManifold:
    """Add a manifold; a name already taken raises DuplicateManifoldError."""
    if manifold.name in _REGISTRY:
        raise DuplicateManifoldError(f"a manifold named {manifold.name!r} is already registered")
    _REGISTRY[manifold.name] = manifold
    return manifold


def get(name: str) -> AnyManifold:
    """The manifold called `name`; an unknown name raises UnknownManifoldError listing the known."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        shown = shorten(repr(name))  # a name from a file: any size
        raise UnknownManifoldError(f"unknown manifold {shown} (known: {known})") from None


def names() -> list[str]:
    """Registered manifold names, sorted."""
    return sorted(_REGISTRY)


# each checked against ManifoldModule by mypy
register(Manifold.from_module(objects))
register(Manifold.from_module(shuffle))
register(Manifold.from_module(sequence))
