"""The manifold registry: names -> manifolds. Pure code."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from manifolds import objects, sequence, shuffle
from manifolds.common import CaseBase, point_seed
from manifolds.grading import Grade


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
    description: str

    def params(self, **values: Any) -> BaseModel:
        """Validated parameters; raises pydantic.ValidationError naming the bad field."""
        return self.params_model(**values)

    def cases(self, params: BaseModel, base_seed: int) -> Iterator[CaseBase]:
        """The `params.count` cases of a grid point, in index order."""
        seed = point_seed(self.name, params, base_seed)
        for index in range(params.count):  # type: ignore[attr-defined]
            yield self.generate(params, seed, index)

    def load_case(self, data: dict[str, Any]) -> CaseBase:
        """A case back from its JSON form."""
        return self.case_model.model_validate(data)


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


register(
    Manifold(
        name=objects.NAME,
        params_model=objects.ObjectCountingGenerationParams,
        case_model=objects.ObjectCountingTestCaseResult,
        generate=objects.generate,
        grade=objects.grade,
        chance_level=objects.chance_level,
        description="Object Counting: count the items of target categories among distractors",
    )
)
register(
    Manifold(
        name=shuffle.NAME,
        params_model=shuffle.ShuffleGenerationParams,
        case_model=shuffle.ShuffleTestCaseResult,
        generate=shuffle.generate,
        grade=shuffle.grade,
        chance_level=shuffle.chance_level,
        description="Shuffle Tracking: who holds which item after a series of swaps",
    )
)
register(
    Manifold(
        name=sequence.NAME,
        params_model=sequence.SequenceGenerationParams,
        case_model=sequence.SequenceTestCaseResult,
        generate=sequence.generate,
        grade=sequence.grade,
        chance_level=sequence.chance_level,
        description="Sequence Pattern Recognition: continue a sequence under interfering rules",
    )
)
