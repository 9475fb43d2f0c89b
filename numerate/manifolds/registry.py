"""The manifold registry: names -> manifolds. Pure code."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from numerate.manifolds import objects, sequence, shuffle
from numerate.manifolds.common import CaseBase, point_seed, stable_hash
from numerate.manifolds.grading import Grade, Outcome

HEURISTIC_SAMPLE = 200
"""Reference cases per grid point for the trivial strategy: learnt on one set, measured on
another (standard error of its accuracy at most 0.035)."""


class UnknownManifoldError(KeyError):
    """A manifold name that the registry does not know."""

    def __str__(self) -> str:
        return str(self.args[0])


class DuplicateManifoldError(ValueError):
    """A second manifold registered under a name already taken."""


@dataclass(frozen=True)
class Manifold:
    """Everything the pipeline needs to know about one test manifold."""

    name: str
    params_model: type[BaseModel]
    case_model: type[CaseBase]
    generate: Callable[[Any, int, int], CaseBase]
    """generate(params, seed, index) -> case."""
    grade: Callable[[Any, str], Grade]
    """grade(case, model_output) -> Grade."""
    chance_level: Callable[[Any], float]
    """chance_level(params) -> probability that a uniform guess is right."""
    guess: Callable[[Any, random.Random], str]
    """guess(case, rng) -> a uniform guess over the case's response space (a baseline)."""
    heuristic_prior: Callable[[list[Any]], Any]
    """heuristic_prior(reference cases of a grid point) -> what the trivial strategy learns."""
    heuristic: Callable[[Any, Any], str]
    """heuristic(case, prior) -> the trivial strategy's answer (baseline:heuristic)."""
    heuristic_description: str
    description: str

    @classmethod
    def from_module(cls, module: ModuleType) -> Manifold:
        """The manifold a module defines with NAME, DESCRIPTION, PARAMS, CASE, generate, grade,
        chance_level and guess."""
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

    def params(self, **values: Any) -> BaseModel:
        """Validated parameters; raises pydantic.ValidationError naming the bad field."""
        return self.params_model(**values)

    def cases(self, params: Any, base_seed: int) -> Iterator[CaseBase]:
        """The `params.count` cases of a grid point, in index order."""
        seed = point_seed(self.name, params, base_seed)
        for index in range(params.count):
            yield self.generate(params, seed, index)

    def load_case(self, data: dict[str, Any]) -> CaseBase:
        """A case back from its JSON form."""
        return self.case_model.model_validate(data)

    def reference_cases(self, params: BaseModel, seed: int, part: int) -> list[CaseBase]:
        """HEURISTIC_SAMPLE cases of the grid point with `seed` that no sweep asks (their own
        seed): part 0 teaches the trivial strategy, part 1 measures it."""
        reference_seed = stable_hash("numerate.heuristic", self.name, seed, part)
        return [self.generate(params, reference_seed, i) for i in range(HEURISTIC_SAMPLE)]

    def heuristic_prior_of(self, params: BaseModel, seed: int) -> Any:
        """What the trivial strategy knows of the grid point (learnt from reference cases)."""
        return self.heuristic_prior(self.reference_cases(params, seed, 0))

    def heuristic_level(self, params: BaseModel, seed: int) -> float:
        """The trivial strategy's accuracy at the grid point, measured on reference cases
        other than those it learnt from: the floor that no reasoning is needed to reach."""
        prior = self.heuristic_prior_of(params, seed)
        cases = self.reference_cases(params, seed, 1)
        right = sum(
            self.grade(case, f"Answer: {self.heuristic(case, prior)}").outcome is Outcome.CORRECT
            for case in cases
        )
        return right / len(cases)


_REGISTRY: dict[str, Manifold] = {}


def register(manifold: Manifold) -> Manifold:
    """Add a manifold; a name already taken raises DuplicateManifoldError."""
    if manifold.name in _REGISTRY:
        raise DuplicateManifoldError(f"a manifold named {manifold.name!r} is already registered")
    _REGISTRY[manifold.name] = manifold
    return manifold


def get(name: str) -> Manifold:
    """The manifold called `name`; an unknown name raises UnknownManifoldError listing the known."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownManifoldError(f"unknown manifold {name!r} (known: {known})") from None


def names() -> list[str]:
    """Registered manifold names, sorted."""
    return sorted(_REGISTRY)


for _module in (objects, shuffle, sequence):
    register(Manifold.from_module(_module))
