"""From a sweep config to the cases it evaluates and the requests that ask them. Pure code."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel

from numerate.config.provenance import generator_label
from numerate.config.sweep import ManifoldSweep, ModelConfig
from numerate.kernel.errors import ConfigError, for_terminal, shorten
from numerate.kernel.inputs import MAX_CASE_DATA_CHARS, MAX_PROMPT_CHARS
from numerate.manifolds import registry
from numerate.manifolds.common import CaseBase, canonical_params, point_seed
from numerate.store.rows import CaseRow


@dataclass(frozen=True, slots=True)
class PlannedCase:
    """A case of a sweep: its `cases` row, with what the pipeline needs to send and grade it.

    A planned case is flat: plain fields, and the rest of the case as JSON text (`data`: the
    fields every case carries are the fields beside it, not repeated there). The case it was
    made from is kept beside them (`parsed`) while a batch is asked and graded, so that grading
    does not parse it again (12-20 µs a case); a planned case rebuilt from its fields parses
    it where a manifold needs it.
    """

    case_id: str
    manifold: str
    point_key: str
    chance: float
    """The floor of the grid point: the stronger of a uniform guess and the trivial strategy."""
    chance_random: float
    chance_heuristic: float
    generator_version: str
    params: str
    """The generation parameters as JSON, keys sorted."""
    seed: int
    index: int
    input: str
    target: str
    data: str
    """The case's JSON without the fields every case carries (REPEATED), which are the fields
    above: its `cases` row's `data`."""
    parsed: CaseBase | None = field(default=None, compare=False, repr=False)
    """The case itself when this planned case was made from it (`of`), else None."""

    @property
    def case(self) -> CaseBase:
        """The full case: the one it was made from, or parsed from its JSON at each call
        (keep it while you need it)."""
        if self.parsed is not None:
            return self.parsed
        return registry.get(self.manifold).case_model.model_validate_json(
            case_json(self.manifold, self.index, self.seed, self.params, self.input,
                      self.target, self.data)
        )  # fmt: skip

    @classmethod
    def of(cls, case: CaseBase, floor: PointFloor, point_key: str, generator_version: str,
           point_params: tuple[dict[str, Any], str] | None = None) -> PlannedCase:  # fmt: skip
        """The planned case of a generated case. `point_params`: its grid point's parameters
        and their JSON (keys sorted), written once for all its cases (`PlannedPoint.cases`);
        used when the case's parameters are those, as every built-in manifold's are."""
        if point_params is not None and case.params == point_params[0]:
            params_json = point_params[1]
        else:
            params_json = json.dumps(case.params, sort_keys=True)
        data = case.model_dump_json(exclude=REPEATED)
        if len(case.input) > MAX_PROMPT_CHARS or len(data) > MAX_CASE_DATA_CHARS:
            raise _too_large(case, point_key, data)
        return cls(
            case_id(case.manifold, generator_version, case.seed, case.index), case.manifold,
            point_key, max(floor.random, floor.heuristic), floor.random, floor.heuristic,
            generator_version, params_json, case.seed, case.index, case.input, case.target,
            data, case,
        )  # fmt: skip

    @classmethod
    def from_row(cls, row: CaseRow, point: PlannedPoint) -> PlannedCase | None:
        """The planned case of `point` a stored `cases` row holds, its case parsed from its
        JSON (grading reads it), labelled with the point's key (a row stored by another
        sweep may carry another key for the same case: its grid named other axes). None for
        a row that is not the point's case (another generator version or seed: a row
        ingested from elsewhere), one stored without both floors (before schema 4), or one
        whose JSON is not the case its columns say (a `data` that repeats the columns, as
        before schema 14, and differs from them): the case is generated instead."""
        floor = stored_floor(row, point.generator_version)
        if floor is None or (row["manifold"], row["seed"]) != (point.manifold, point.seed):
            return None
        whole = case_json(row["manifold"], row["case_index"], row["seed"], row["params"],
                          row["input"], row["target"], row["data"])  # fmt: skip
        try:
            case = registry.get(row["manifold"]).case_model.model_validate_json(whole)
        except (ValueError, KeyError):  # pydantic's ValidationError; a manifold not registered
            return None
        stored = (row["input"], row["target"], row["case_index"], row["seed"])
        if (case.input, case.target, case.index, case.seed) != stored:
            return None
        return cls(
            row["case_id"], row["manifold"], point.key, row["chance"], floor.random,
            floor.heuristic, row["generator_version"], row["params"], row["seed"],
            row["case_index"], row["input"], row["target"], row["data"], case,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PointFloor:
    """What a grid point's accuracy must beat: a uniform guess, and the trivial strategy."""

    random: float
    heuristic: float


def stored_floor(row: CaseRow, generator_version: str) -> PointFloor | None:
    """The floors a stored case carries, when it has both (stored since schema 4) and was
    stored by `generator_version` (not a row ingested from elsewhere under the same id)."""
    random, heuristic = row["chance_random"], row["chance_heuristic"]
    if random is None or heuristic is None:
        return None
    if version_of(row["generator_version"]) != version_of(generator_version):
        return None
    return PointFloor(random, heuristic)


def _too_large(case: CaseBase, point_key: str, data: str) -> ConfigError:
    """The error of a case beyond what a case may hold (its prompt, its own fields): one a
    run's shards could not carry (numerate.store.shard_checks)."""
    what, size, most = (
        ("prompt", len(case.input), MAX_PROMPT_CHARS)
        if len(case.input) > MAX_PROMPT_CHARS
        else ("own fields (its data, as JSON)", len(data), MAX_CASE_DATA_CHARS)
    )
    return ConfigError(
        f"{case.manifold} grid point {shorten(for_terminal(point_key))}: case {case.index}'s "
        f"{what} is {size:,} characters, more than the {most:,} a case may hold: make its "
        "parameters smaller"
    )


REPEATED: set[str] = set(CaseBase.model_fields)
"""The fields every case carries (manifold, index, seed, params, input, target): a `cases`
row holds them as columns, and its `data` the case's other fields
(docs/schema.md, "A case's data")."""


def case_json(manifold: str, index: int, seed: int, params: str, input: str, target: str,
              data: str) -> str:  # fmt: skip
    """The whole case as JSON text, from a `cases` row's columns and its `data`. A field that
    `data` holds too (a row stored before schema 14, which repeated them all) is read from
    `data`, as it was then: the last of two equal keys is the one a JSON parser keeps."""
    head = (
        f'{{"manifold":{json.dumps(manifold)},"index":{int(index)},"seed":{int(seed)},'
        f'"params":{params},"input":{json.dumps(input)},"target":{json.dumps(target)}'
    )
    rest = data.strip()[1:].lstrip()
    return f"{head}}}" if rest == "}" else f"{head},{rest}"


def case_id(manifold: str, generator_version: str, seed: int, index: int) -> str:
    """Id of a case: the same case (same generator) has the same id in every run and sweep; a
    changed generator gives new ids, so stored text and targets are never mixed."""
    return f"{manifold}-{version_of(generator_version)[:8]}-{seed:016x}-{index}"


def version_of(label: str) -> str:
    """The generator version of a stored label (the hash, without `+dirty`)."""
    return label.split("+")[0]


@dataclass(frozen=True, slots=True)
class PlannedPoint:
    """A grid point of a sweep: what makes its cases, not the cases. They are generated when
    they are asked (`cases`), a batch at a time, so a plan of a million cases takes the memory
    of its grid points. A point's cases are a deterministic sequence: a case depends on the
    point's parameters, its seed and its index only."""

    manifold: str
    key: str
    params: BaseModel
    seed: int
    count: int
    floor: PointFloor
    generator_version: str
    stored: bool = False
    """Its first case was stored when it was planned (an earlier run of the point): its cases
    are read from the store, not generated again (`made_cases`)."""

    def case_ids(self, start: int, stop: int) -> list[str]:
        """The ids of the point's cases `start` to `stop`, without making them."""
        return [
            case_id(self.manifold, self.generator_version, self.seed, index)
            for index in range(start, min(stop, self.count))
        ]

    def cases(self, start: int = 0, stop: int | None = None) -> list[PlannedCase]:
        """The point's cases `start` to `stop` (exclusive; default: to its count)."""
        spec = registry.get(self.manifold)
        stop = self.count if stop is None else min(stop, self.count)
        canonical = canonical_params(self.params)
        point_params = (canonical, json.dumps(canonical, sort_keys=True))
        return [
            PlannedCase.of(spec.generate(self.params, self.seed, index), self.floor, self.key,
                           self.generator_version, point_params)
            for index in range(start, stop)
        ]  # fmt: skip


def plan_points(
    sweep: ManifoldSweep,
    base_seed: int,
    generator_version: str | None = None,
    stored: Mapping[str, PointFloor] | None = None,
    planned: Callable[[int, int], None] = lambda done, points: None,
) -> list[PlannedPoint]:
    """Every grid point of one manifold entry, in a stable order, with what its cases must
    beat (the trivial strategy's level is measured once per point: a large grid takes a
    while, and `planned(done, points)` is told after each point).

    Args:
        sweep: the manifold entry of a sweep config.
        base_seed: the sweep's seed.
        generator_version: the manifold's generator version, stored with each case and part
            of its id (default: read from its sources by numerate.config.provenance).
        stored: the floors stored with earlier runs' cases, by the id of a point's first case
            (`first_case_ids`): a point found there takes them, not measured again (2 x
            HEURISTIC_SAMPLE cases generated and graded a point, every run). They are the
            floors its stored cases carry, which aggregation reads.
    """
    if generator_version is None:
        generator_version = generator_label(sweep.manifold)
    spec = registry.get(sweep.manifold)
    points = []
    grid = sweep.points()
    for key, params in grid:
        seed = point_seed(spec.name, params, base_seed)
        floor = (stored or {}).get(case_id(spec.name, generator_version, seed, 0))
        found = floor is not None
        if floor is None:
            floor = PointFloor(spec.chance_level(params), spec.heuristic_level(params, seed))
        points.append(PlannedPoint(
            spec.name, key, params, seed, sweep.planned_count, floor, generator_version, found
        ))  # fmt: skip
        planned(len(points), len(grid))
    return points


def first_case_ids(sweep: ManifoldSweep, base_seed: int, generator_version: str) -> list[str]:
    """The id of each grid point's first case (index 0, the first any run stores), in
    `plan_points`' order: what a point's stored floors are found by."""
    name = registry.get(sweep.manifold).name
    return [
        case_id(name, generator_version, point_seed(name, params, base_seed), 0)
        for _, params in sweep.points()
    ]


@dataclass(frozen=True, slots=True)
class CaseRange:
    """Cases `start` to `stop` (exclusive) of a grid point: a part of a batch, before its
    cases are made (numerate.planning.adaptive.Sampler.take)."""

    point: PlannedPoint
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def case_ids(self) -> list[str]:
        return self.point.case_ids(self.start, self.stop)

    def cases(self) -> list[PlannedCase]:
        """The range's cases, generated."""
        return self.point.cases(self.start, self.stop)


def stored_ids(ranges: Sequence[CaseRange]) -> list[str]:
    """The ids worth looking for in the store before the ranges' cases are made: those of
    points stored before (`PlannedPoint.stored`)."""
    return [i for part in ranges if part.point.stored for i in part.case_ids()]


def made_cases(ranges: Sequence[CaseRange], stored: Mapping[str, CaseRow]) -> list[PlannedCase]:
    """The ranges' cases, in order: a stored case is read back from its row (as the store
    holds it: a case id stands for one case, so it is the case its generator would make,
    without the 50-160 µs of making it); the others are generated."""
    made: list[PlannedCase] = []
    for part in ranges:
        read = [PlannedCase.from_row(stored[i], part.point) if i in stored else None
                for i in (part.case_ids() if stored else ())]  # fmt: skip
        if read and all(read):
            made.extend(cast(list[PlannedCase], read))
        else:
            made.extend(part.cases())
    return made


def plan_manifold(
    sweep: ManifoldSweep, base_seed: int, generator_version: str | None = None
) -> list[PlannedCase]:
    """Every case of every grid point of one manifold entry, in a stable order, at once (for
    tests and benchmarks: a sweep asks `plan_points`' cases a batch at a time)."""
    return [
        case for point in plan_points(sweep, base_seed, generator_version) for case in point.cases()
    ]


def case_row(planned: PlannedCase) -> CaseRow:
    """The `cases` table row of a planned case."""
    return {
        "case_id": planned.case_id,
        "manifold": planned.manifold,
        "point_key": planned.point_key,
        "params": planned.params,
        "seed": planned.seed,
        "case_index": planned.index,
        "input": planned.input,
        "target": planned.target,
        "chance": planned.chance,
        "data": planned.data,
        "generator_version": planned.generator_version,
        "chance_random": planned.chance_random,
        "chance_heuristic": planned.chance_heuristic,
    }


# ---------------------------------------------------------------------------- requests


def messages_for(model: ModelConfig, planned: PlannedCase) -> list[dict[str, str]]:
    """The chat messages sent for a case."""
    messages = [{"role": "user", "content": planned.input}]
    if model.system_prompt:
        messages.insert(0, {"role": "system", "content": model.system_prompt})
    return messages


def request_hasher(model: ModelConfig, sample: int = 0) -> Callable[[list[dict[str, str]]], str]:
    """The key of a request, as a function of its messages (for many cases): a hash of
    everything that decides its answer — the endpoint (base URL), the model id, its declared
    revision, the messages, the sampling parameters and the sample index. Two servers,
    revisions or samples never share a key.

    The key is the SHA-256 of the JSON object {endpoint, messages, model, revision, sample,
    sampling} with sorted keys and no spaces. Everything but the messages is serialised once,
    before and after them (the same bytes as serialising the whole object each time).
    """

    def dumps(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    head = ('{"endpoint":' + dumps(model.base_url) + ',"messages":').encode()
    tail = (
        f',"model":{dumps(model.model_id)},"revision":{dumps(model.revision)},'
        f'"sample":{dumps(sample)},"sampling":{dumps(model.sampling.request_fields(sample))}}}'
    ).encode()

    def key(messages: list[dict[str, str]]) -> str:
        digest = hashlib.sha256(head)
        digest.update(dumps(messages).encode())
        digest.update(tail)
        return digest.hexdigest()

    return key
