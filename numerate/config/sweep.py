"""Sweep configuration: which models, which manifolds, which difficulty grid.

Pure code: validation only. `load_sweep_config` is the one function that reads a file.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from numerate.kernel import names
from numerate.kernel.credentials import scrub
from numerate.kernel.errors import (
    YAML_DATES,
    ConfigError,
    describe_validation_error,
    field_path,
    shorten,
    shown_value,
    undecodable,
    what_it_is,
)
from numerate.kernel.files import read_text
from numerate.kernel.http import shown_url, url_problem
from numerate.kernel.inputs import (
    LINE_CONTROLS,
    MAX_CONFIG_BYTES,
    MAX_FIELD_CHARS,
    Real,
    Seed,
    Whole,
    check_parameters_size,
    has_control_character,
    yaml_value,
)
from numerate.manifolds import registry
from numerate.manifolds.common import canonical_params

MAX_POINTS = 100_000
"""Most grid points one manifold entry, and a whole sweep, may have (a typo such as a 1,000 x
1,000 grid is refused at once instead of being planned: each new point's trivial strategy
is measured as it is planned, about 0.1 s a point, and every point is held while the sweep
runs)."""

DEFAULT_DB = "results/numerate.duckdb"
"""Where results go when nothing says otherwise."""


def results_database(given: str | None = None, configured: str | None = None) -> str:
    """The one default-database rule: the database a command or flow was given (--db, a `db`
    parameter), else the one its config names, else $NUMERATE_DB, else
    results/numerate.duckdb; a leading `~` is the home folder. An empty or blank path given
    or configured is a ConfigError
    (it would silently mean "here"); an empty $NUMERATE_DB counts as unset. The path chosen
    is refused, named by where it came from, when it holds a control character."""
    environment = os.environ.get("NUMERATE_DB", "").strip() or None
    for what, value in (("--db", given), ("db", configured), ("NUMERATE_DB", environment)):
        if value is None:
            continue
        if not value.strip():
            raise ConfigError(
                f"{what} {value!r}: give the results database's path (or leave it out for "
                f"$NUMERATE_DB, else {DEFAULT_DB})"
            )
        if has_control_character(value):
            raise ConfigError(f"{what} {value!r}: a path with a control character (a newline?)")
        shown = undecodable(value)
        if shown is not None:  # shown as \udcff before
            raise ConfigError(
                f"{what} {shown}: not valid text (undecodable bytes; numerate reads paths as UTF-8)"
            )
        chosen = value
        break
    else:
        what, chosen = "default", DEFAULT_DB
    # `~/r.duckdb` (quoted, or in a config): the home folder's, as DuckDB reads it; numerate's
    # own checks looked for a folder named `~` and called the file DuckDB made there damaged
    chosen = os.path.expanduser(chosen)
    if chosen.endswith("/"):  # writers made the file without it, then failed on its journal
        raise ConfigError(
            f"{what} {chosen:.200}: a folder's name (it ends with /); give the results "
            "database's file name"
        )
    if what == "NUMERATE_DB" and os.path.isdir(chosen):  # said without naming the variable
        raise ConfigError(f"NUMERATE_DB {chosen:.200}: a folder; give the results database's file")
    return chosen


BASELINES = ("baseline:random", "baseline:oracle", "baseline:heuristic")
"""Built-in models that need no network: a uniform guess, one that answers the target, and
one that plays each manifold's trivial strategy (see docs/manifolds.md, "Chance and heuristics")."""

_STRICT = ConfigDict(
    extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
)


class Sampling(BaseModel):
    """Sampling parameters sent with every request (and part of its cache key)."""

    model_config = _STRICT

    temperature: Real = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 for (near-)greedy decoding."""
    max_tokens: Whole = Field(2048, ge=1, le=1_000_000)
    """Most completion tokens; a response cut here is graded `truncated`."""
    top_p: Real | None = Field(None, gt=0.0, le=1.0)
    """Nucleus sampling mass; left to the server when absent."""
    seed: Seed | None = None
    """Sampling seed, for servers that honour one (sample k of a case is sent seed + k)."""
    samples: Whole = Field(1, ge=1, le=100)
    """Answers asked per case: distinct requests, each graded on its own."""

    def request_fields(self, sample: int = 0) -> dict[str, Any]:
        """The fields as the chat API takes them for sample `sample` of a case (absent ones
        left out)."""
        fields = self.model_dump(exclude_none=True, exclude={"samples"})
        if self.seed is not None:
            fields["seed"] = self.seed + sample
        return fields


class ModelConfig(BaseModel):
    """One model under evaluation: an OpenAI-compatible endpoint or a built-in baseline.

    Named as the results store them: `name` is the label (column `model`), `model_id` the id
    the endpoint serves (column `model_id`), written `model` in a config file."""

    model_config = ConfigDict(
        **_STRICT, serialize_by_alias=True, validate_by_alias=True, validate_by_name=False
    )

    name: str = Field(min_length=1, max_length=200, pattern=names.MODEL_NAME)
    """Label stored in the results (letters, digits and _ . : / @ + -)."""
    model_id: str = Field(min_length=1, max_length=200, alias="model", pattern=names.MODEL_ID)
    """Model id the endpoint serves, or `baseline:random` / `baseline:oracle` /
    `baseline:heuristic` (`model` in a config file): no space, control character or
    < > " ' ` \\ (numerate.kernel.names)."""
    base_url: str | None = None
    """Endpoint root, e.g. http://127.0.0.1:8000/v1 (not needed for baselines): request paths
    are added at its end, so it holds no query or fragment; a `user:password@` in it is sent
    as basic authentication, instead of a key (not with `api_key_env`/`api_key_secret`)."""
    revision: str | None = Field(None, min_length=1, max_length=200)
    """Declared revision of what the endpoint serves (a checkpoint hash, a date): part of the
    cache key, so answers of one revision are never reused for another."""
    cache: Literal["resume", "reuse", "off"] = "resume"
    """Which stored answers may stand in for a request: `resume` only those of the run being
    resumed (every new run asks again), `reuse` those of any run (same endpoint, model id,
    revision, messages, sampling and sample), `off` none."""
    api_key_env: str | None = Field(None, min_length=1, pattern=names.ENV_NAME)
    """Environment variable holding the API key; the key itself is never stored."""
    api_key_secret: str | None = None
    """Name of a Prefect Secret block holding the API key (instead of api_key_env)."""
    concurrency_limit: str | None = Field(None, pattern=names.LIMIT_NAME)
    """Prefect global concurrency limit shared by every run against this endpoint; the model
    holds `concurrency` of its slots while it is evaluated (none: no limit across runs)."""
    concurrency: Whole = Field(16, ge=1, le=4096)
    """Most requests in flight at once against this model."""
    timeout_s: Real = Field(600.0, gt=0, le=86_400)
    """Seconds one request may take before it is retried."""
    max_retries: Whole = Field(6, ge=0, le=100)
    """Retries of a request after a timeout, connection error, 429 or 5xx."""
    max_error_rate: Real = Field(0.02, ge=0.0, le=1.0)
    """Share of the model's answers that may end as `error` before its part of the run counts
    as degraded (the run then exits non-zero)."""
    breaker_after: Whole = Field(10, ge=1, le=100_000)
    """Non-retryable answers (HTTP 400, 401, 403, 404, 422) before any success that stop the
    model at once (its unsent requests stay unsent)."""
    throttle_budget_s: Real = Field(600.0, gt=0.0, le=86_400.0)
    """Seconds one request may keep being refused by a rate limit (429, 503) before it ends
    as an error; rate limits lower the concurrency and do not spend `max_retries`."""
    down_after_s: Real = Field(30.0, gt=0.0, le=86_400.0)
    """Seconds a server may stay unreachable (no answer at all) before the model is stopped."""
    system_prompt: str | None = Field(None, min_length=1)
    """Optional system message sent before every case (leave it out for none)."""
    sampling: Sampling = Sampling()
    """Sampling parameters."""

    @property
    def is_baseline(self) -> bool:
        return self.model_id.startswith("baseline:")

    @field_validator("base_url")
    @classmethod
    def _scheme_in_lower_case(cls, url: str | None) -> str | None:
        """A URL's scheme is case-insensitive (`HTTP://` is `http://`): written in lower case,
        as every other base URL is, so both ask (and key) one endpoint alike."""
        scheme, sep, rest = (url or "").partition("://")
        if sep and scheme.lower() in ("http", "https"):
            return f"{scheme.lower()}://{rest}"
        return url

    @field_serializer("base_url", when_used="json")
    def _no_credentials(self, url: str | None, info: SerializationInfo) -> str | None:
        """A base URL's user name and password stay in this process: its JSON form (what
        Prefect stores as a flow run's parameters, what the database and the fingerprint see)
        shows `http://***@host`, unless the dump is given WITH_CREDENTIALS (a config rebuilt
        from another in this process)."""
        if url is None or (info.context or {}).get("credentials"):
            return url
        return scrub(url, ())

    @model_validator(mode="after")
    def _endpoint_or_baseline(self) -> ModelConfig:
        if self.is_baseline:
            if self.model_id not in BASELINES:
                raise ValueError(
                    f"model = {self.model_id!r} is not a baseline (known: {', '.join(BASELINES)})"
                )
            given = _endpoint_settings(self)
            if given:  # a baseline asks no endpoint: the field would be ignored
                raise ValueError(
                    f"{given[0]}: model {self.name!r} is {self.model_id}, which asks no "
                    "endpoint (leave it out)"
                )
        elif self.base_url is None:
            raise ValueError(f"model {self.name!r} needs a base_url (or a baseline: model)")
        elif not self.base_url.strip():
            raise ValueError(f"base_url = {self.base_url!r} is empty (the endpoint's root URL)")
        elif not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url = {shown_url(self.base_url)!r} must start with http:// or https://"
            )
        else:
            _check_url(self.base_url)
        if self.api_key_env and self.api_key_secret:
            raise ValueError(f"model {self.name!r}: set api_key_env or api_key_secret, not both")
        key = "api_key_env" if self.api_key_env else "api_key_secret" if self.api_key_secret else ""
        if key and self.base_url and "@" in urlsplit(self.base_url).netloc:
            raise ValueError(  # both would be the one Authorization header: one would be lost
                f"model {self.name!r}: base_url = {shown_url(self.base_url)!r} holds "
                f"user:password@ and {key} names a key; both are sent as the Authorization "
                "header, so give one of them"
            )
        return self


ENDPOINT_ONLY = (
    "base_url",
    "api_key_env",
    "api_key_secret",
    "system_prompt",
    "revision",
    "timeout_s",
    "max_retries",
    "breaker_after",
    "throttle_budget_s",
    "down_after_s",
    "concurrency",
    "concurrency_limit",
    "max_error_rate",
)
"""A model's fields only an endpoint uses: a baseline given one (not its default) is refused."""

SAMPLING_ENDPOINT_ONLY = ("temperature", "max_tokens", "top_p")
"""Sampling fields only an endpoint uses (a baseline's `samples` and `seed` draw its answers)."""


def _endpoint_settings(model: ModelConfig) -> list[str]:
    """The fields of `model` set (not to their defaults) that only an endpoint uses."""
    models, samplings = ModelConfig.model_fields, Sampling.model_fields
    given = [f for f in ENDPOINT_ONLY if getattr(model, f) != models[f].default]
    return given + [
        f"sampling.{f}"
        for f in SAMPLING_ENDPOINT_ONLY
        if getattr(model.sampling, f) != samplings[f].default
    ]


WITH_CREDENTIALS = {"credentials": True}
"""`model_dump(mode="json", context=WITH_CREDENTIALS)`: keep base URLs' passwords (for a config
rebuilt from the dump in this process; never for what leaves it)."""

DEFAULT_COUNT = 20
"""Cases per grid point when a manifold entry gives neither `count` nor `precision`."""


class Precision(BaseModel):
    """Adaptive sampling of a manifold entry (numerate.planning.adaptive): each grid point asks
    `min_count` cases, then `step` more at a time, until the full width of the 95% interval
    its accuracy is reported with is at most `ci_width` or `max_count` cases were asked."""

    model_config = _STRICT

    ci_width: Real = Field(gt=0, le=1)
    """Target full width of the 95% interval (0.10: accuracy +- about 0.05)."""
    min_count: Whole = Field(20, ge=1, le=1_000_000)
    max_count: Whole = Field(400, ge=1, le=1_000_000)
    step: Whole = Field(20, ge=1, le=1_000_000)
    min_scored: Real = Field(0.5, ge=0, le=1)
    """A point stops (`unscored`) when fewer than this share of its answers were graded
    correct or wrong (truncated, unparsed and failed requests count as asked): answers that
    cannot be read say little of the model's reasoning, however narrow their interval."""

    @model_validator(mode="after")
    def _ordered(self) -> Precision:
        if self.max_count < self.min_count:
            raise ValueError(f"max_count = {self.max_count} is below min_count = {self.min_count}")
        return self


class ManifoldSweep(BaseModel):
    """One manifold and its difficulty grid."""

    model_config = _STRICT

    manifold: str
    """Registered manifold name: objects, shuffle or sequence."""
    count: Whole | None = Field(None, ge=1, le=1_000_000)
    """Cases per grid point (default 20 when there is no `precision`)."""
    precision: Precision | None = None
    """Instead of `count`: sample each point until its interval is narrow enough."""
    grid: dict[str, Any] = {}
    """Parameter -> list of values (an axis of the cartesian product) or a scalar (fixed)."""
    _points: list[tuple[str, BaseModel]] = PrivateAttr(default_factory=list)
    _identities: list[str] = PrivateAttr(default_factory=list)
    """Each point's identity (point_identity), in the order of `_points`."""

    @model_validator(mode="before")
    @classmethod
    def _default_count(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("precision") is None and data.get("count") is None:
            return {**data, "count": DEFAULT_COUNT}
        return data

    @model_validator(mode="after")
    def _count_or_precision(self) -> ManifoldSweep:
        if self.precision is not None and self.count is not None:
            raise ValueError(
                "count and precision: give one (count asks a fixed number of cases per point; "
                "precision asks until the interval is narrow enough, at most max_count)"
            )
        return self

    @property
    def planned_count(self) -> int:
        """Cases generated per point: `count`, or the most `precision` may ask."""
        return self.precision.max_count if self.precision else self.count or DEFAULT_COUNT

    @field_validator("manifold")
    @classmethod
    def _known(cls, name: str) -> str:
        try:
            registry.get(name)
        except registry.UnknownManifoldError as error:
            raise ValueError(str(error)) from None
        return name

    @model_validator(mode="after")
    def _valid_points(self) -> ManifoldSweep:
        self._points = self._build_points()  # built once, where the config is validated
        return self

    def points(self) -> list[tuple[str, BaseModel]]:
        """Every grid point as (point key, validated parameters), in a stable order.

        The point key names the grid's own values, e.g. `anchor=ROMAN,length=8`.
        """
        return list(self._points)

    def _build_points(self) -> list[tuple[str, BaseModel]]:
        spec = registry.get(self.manifold)
        if "count" in self.grid:
            raise ValueError("grid.count: set `count` beside the grid, not inside it")
        unknown = sorted(set(self.grid) - set(spec.params_model.model_fields))
        if unknown:
            known = ", ".join(f for f in spec.params_model.model_fields if f != "count")
            raise ValueError(f"grid.{unknown[0]}: {self.manifold} has no such parameter ({known})")
        axes = {k: (v if isinstance(v, list) else [v]) for k, v in sorted(self.grid.items())}
        for key, values in axes.items():
            if not values:
                raise ValueError(f"grid.{key}: an axis needs at least one value")
            for value in values:
                if value is not None and not isinstance(value, str | int | float):
                    hint = YAML_DATES if isinstance(value, date) else ""
                    raise ValueError(
                        f"grid.{key} = {shorten(shown_value(value))}: a grid value is text, a "
                        f"number, true, false or null, not {what_it_is(value)}{hint}"
                    )
        sizes = [len(values) for values in axes.values()]
        if math.prod(sizes) > MAX_POINTS:
            shown = " x ".join(f"{len(v)} {k}" for k, v in axes.items())
            raise ValueError(
                f"grid: {shown} = {math.prod(sizes):,} grid points, more than {MAX_POINTS:,}"
            )
        points: list[tuple[str, BaseModel]] = []
        seen: dict[str, str] = {}  # a point's identity -> its key (a dict: 100,000 points)
        named: set[str] = set()
        for combination in itertools.product(*axes.values()):
            point = dict(zip(axes, combination, strict=True))
            key = ",".join(f"{k}={_show(v)}" for k, v in point.items()) or "default"
            try:
                params = spec.params(count=self.planned_count, **point)
            except ValidationError as error:
                problem = error.errors()[0]
                field = field_path(problem["loc"])
                shown = f" = {shorten(shown_value(problem['input']))}" if field else ""
                message = shorten(problem["msg"].removeprefix("Value error, "), 300)
                where = f"grid.{field}" if field else f"grid point {shorten(key)}"
                raise ValueError(f"{where}{shown}: {message}") from None
            _check_key(key, point)
            identity = point_identity(params)
            if identity in seen:  # its cases would be planned twice and asked once
                raise ValueError(f"grid: the points {seen[identity]} and {key} are the same point")
            if key in named:  # its results would be stored as one point's
                raise ValueError(_named_twice(key))
            seen[identity] = key
            named.add(key)
            points.append((key, params))
        self._identities = list(seen)
        return points


def _check_url(url: str) -> None:
    """A URL that an HTTP client can use (kernel.http.url_problem), with no query or
    fragment: request paths are added at its end."""
    problem = url_problem(url)
    shown = shorten(repr(shown_url(url)), 200)  # the reason, not a URL's 8,000 characters
    if problem:
        raise ValueError(f"base_url = {shown} is not a valid URL: {problem}")
    parts = urlsplit(url)
    if parts.query or parts.fragment or url.endswith(("?", "#")):  # paths are added after it
        raise ValueError(
            f"base_url = {shown} holds a query or fragment ('?' or '#'): request "
            "paths such as /chat/completions are added at its end (give the endpoint's root, "
            "and a key with api_key_env)"
        )


def point_identity(params: BaseModel) -> str:
    """What makes two grid points the same point: their parameters but `count` (a smaller count
    is a prefix of a larger one), as sorted JSON (a zero written `-0.0` is 0.0 there:
    numerate.manifolds.registry.Manifold.params)."""
    return json.dumps(canonical_params(params), sort_keys=True)


def _show(value: Any) -> str:
    """A grid value in its point's key: a text as it is, but each control character other
    than a tab or a newline written as its escape (`\r`, `\x1b`: a key holding one could
    not be moved between databases); any other value as JSON."""
    if not isinstance(value, str):
        return json.dumps(value)
    return re.sub(f"[{LINE_CONTROLS}]", lambda found: repr(found.group())[1:-1], value)


def names_point(key: str, params: dict[str, Any]) -> bool:
    """Whether `key` is the point key of some grid over the parameters `params` (a case's, as
    its `cases` row stores them): `default`, or `name=value` for some of them, in the order of
    their names, joined by commas, each value its parameter's (as `_show` writes the grid's,
    or JSON that reads as it: `1` for 1.0). Two sweeps that name different axes give one case
    different keys; a key naming another point's value names none of this case's."""
    if key == "default":
        return True
    names = sorted(params)

    def same(text: str, value: Any) -> bool:
        if text == _show(value):
            return True
        if isinstance(value, str) or len(text) > 40:  # a number written otherwise is short:
            return False  # a hostile key's every comma costs no parse of all that follows
        try:
            return bool(json.loads(text) == value)
        except ValueError:
            return False

    def rest_fits(start: int, first_name: int) -> bool:  # key[start:], names from there on
        for i in range(first_name, len(names)):
            head = f"{names[i]}="
            if not key.startswith(head, start):
                continue
            begin = start + len(head)
            end = begin
            while end != -1:  # the value ends at a comma, or at the key's end
                end = key.find(",", end)
                value_end = len(key) if end == -1 else end
                if same(key[begin:value_end], params[names[i]]) and (
                    end == -1 or rest_fits(end + 1, i + 1)
                ):
                    return True
                end = -1 if end == -1 else end + 1
        return False

    return rest_fits(0, 0)


def _named_twice(key: str) -> str:
    return (
        f"grid: two different points are both named {shorten(key)} (a text value holding ',' "
        "or '=' spells another point's name, and their answers would be counted as one "
        "point's): change that value"
    )


def _check_key(key: str, point: dict[str, Any]) -> None:
    """A grid point's key is stored with each of its answers and moved with them between
    databases (`numerate ingest`): refused here when a shard could not hold it (longer than
    MAX_FIELD_CHARS), naming the longest value."""
    problem = too_long_for_a_point(point, "grid.", len(key))
    if problem:
        raise ValueError(problem)


def too_long_for_a_point(values: Mapping[str, Any], where: str, size: int | None = None) -> str:
    """Why `values` (a grid point's, or a case's parameters but `count`) are too long for a
    grid point (its name, `name=value,...`, `size` characters, at most MAX_FIELD_CHARS),
    naming the longest (`where` before its name); "" when they are not. The bound keeps the
    largest prompt a manifold makes within MAX_PROMPT_CHARS (a case of Shuffle Tracking
    repeats its anchors 401 times), so `generate` and `grade` hold to it as a sweep does."""
    if size is None:
        size = len(",".join(f"{k}={_show(v)}" for k, v in values.items() if k != "count"))
    if size <= MAX_FIELD_CHARS:
        return ""
    field, value = max(values.items(), key=lambda item: len(_show(item[0])) + len(_show(item[1])))
    return (
        f"{where}{field_path([field])} = {shorten(shown_value(value))}: the values take "
        f"{size:,} characters, "
        f"more than the {MAX_FIELD_CHARS:,} a grid point's name may have"
    )


class SweepConfig(BaseModel):
    """A sweep: models x manifolds x difficulty grid."""

    model_config = _STRICT

    name: str = Field(min_length=1, max_length=100, pattern=names.SWEEP_NAME)
    """Sweep name stored with every run."""
    seed: Seed = 0
    """Base seed of every grid point."""
    db: str | None = None
    """DuckDB file for the results; the CLI's --db overrides it."""
    results_dir: str | None = None
    """Shared results location (folder or fsspec URL): each finished run also publishes its
    rows there as Parquet shards, for `numerate ingest` to load centrally."""
    view_dir: str | None = None
    """A folder the readers of the results can reach (a shared mount): after each run, its pages
    of `numerate view` (and those of the run it is compared with) are written to
    VIEW_DIR/RUN_ID/, and the run's summary artifact links to them."""
    batch_size: Whole = Field(2000, ge=1, le=100_000)
    """Cases per Prefect task when asking a model: one task per batch keeps orchestration cheap."""
    max_cases: Whole = Field(10_000_000, ge=1)
    """Most answers a run may ask for (models x cases x samples): a larger sweep is refused
    before anything runs."""
    models: list[ModelConfig] = Field(min_length=1)
    """The models to evaluate."""
    manifolds: list[ManifoldSweep] = Field(min_length=1)
    """The manifolds and their grids."""

    @model_validator(mode="before")
    @classmethod
    def _points_in_all(cls, data: Any) -> Any:
        """At most MAX_POINTS grid points in all the entries, counted from their grids before
        any entry's points are made: ten entries of 90,000 points each took 2.2 GB while the
        first was planned (a hostile sweep)."""
        entries = data.get("manifolds") if isinstance(data, dict) else None
        if not isinstance(entries, list | tuple):
            return data  # a field's own check says what is wrong

        def points(entry: Any) -> int:
            if isinstance(entry, ManifoldSweep):
                return len(entry.points())
            grid = entry.get("grid") if isinstance(entry, dict) else None
            if not isinstance(grid, dict):
                return 1
            return math.prod(len(v) if isinstance(v, list) else 1 for v in grid.values())

        counts = [points(entry) for entry in entries]
        total = sum(counts)
        if total > MAX_POINTS and max(counts) <= MAX_POINTS:  # one entry's: said with its axes
            raise ValueError(
                f"manifolds: {total:,} grid points in all, more than {MAX_POINTS:,} (each new "
                "point is measured as it is planned, about 0.1 s a point: split the sweep)"
            )
        return data

    @field_validator("results_dir", "view_dir")
    @classmethod
    def _a_place(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("give a folder, or leave the field out (empty would mean here)")
        if value is not None and has_control_character(value):
            raise ValueError("a path with a control character (a newline?)")
        return value

    @model_validator(mode="after")
    def _distinct_points(self) -> SweepConfig:
        seen: dict[tuple[str, str], int] = {}
        named: dict[tuple[str, str], str] = {}  # (manifold, key) -> the point's identity
        for number, entry in enumerate(self.manifolds):
            for (key, _params), point in zip(entry.points(), entry._identities, strict=True):
                earlier = seen.setdefault((entry.manifold, point), number)
                if earlier != number:  # a count is a prefix of a larger one: the same cases
                    raise ValueError(
                        f"manifolds: entries {earlier} and {number} both hold the {entry.manifold}"
                        f" point {key} (its cases would be counted twice; one entry, one count)"
                    )
                if named.setdefault((entry.manifold, key), point) != point:
                    raise ValueError(f"manifolds: {entry.manifold} {_named_twice(key)}")
        return self

    @model_validator(mode="after")
    def _distinct_model_names(self) -> SweepConfig:
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"models: the name {duplicates[0]!r} is used twice")
        return self

    @model_validator(mode="after")
    def _bounded(self) -> SweepConfig:
        cases = self.total_cases()
        answers = sum(cases * m.sampling.samples for m in self.models)
        if answers > self.max_cases:
            raise ValueError(
                f"max_cases: {len(self.models)} model(s) x {cases:,} cases (with their samples) "
                f"= {answers:,} answers, more than max_cases = {self.max_cases:,}"
            )
        check_parameters_size(self.model_dump_json(), "the sweep config")
        return self

    def fingerprint(self) -> str:
        """Hash of everything that decides the run's cases and requests (not where results
        go, nor a base URL's password: a run resumes after the password changes)."""
        data = self.model_dump(mode="json", exclude={"db", "results_dir", "view_dir"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def total_cases(self) -> int:
        """Cases per model (at most, with adaptive sampling)."""
        return sum(m.planned_count * len(m.points()) for m in self.manifolds)


def parse_sweep_config(
    data: Any,
    source: str = "sweep config",
    options: dict[str, str] | None = None,
    yaml: bool = False,
) -> SweepConfig:
    """Validate a sweep config; a problem raises ConfigError naming the field and the value
    (or the command-line option that gave the field, `options`: {field: option}; `yaml`: read
    from a YAML file, see numerate.kernel.errors.describe_validation_error)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top, got {what_it_is(data)}")
    refuse_the_other_kind(data, source, "sweep")
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, source, options, yaml)) from None


ConfigKind = Literal["sweep", "numgen"]
_KIND_NAMES: dict[ConfigKind, tuple[str, str]] = {
    "sweep": ("a sweep config", "numerate run --config"),
    "numgen": ("a NumGen config", "numerate numgen run --config"),
}


def refuse_the_other_kind(data: dict[Any, Any], source: str, expected: ConfigKind) -> None:
    """A config of the other kind (a sweep config where a NumGen one is expected, or the
    reverse) is one ConfigError saying so and where it goes; each of its keys used to be an
    error line of its own. It is the other kind when none of its keys is one of `expected`'s
    and all are the other's: a sweep config with one stray NumGen key gets the usual errors."""
    other: ConfigKind = "numgen" if expected == "sweep" else "sweep"
    keys = set(data)
    if keys & {"prefect-version", "deployments"}:  # deployments/prefect.yaml: a line a key
        raise ConfigError(
            f"{source} is a Prefect deployment file (prefect-version, deployments), not "
            f"{_KIND_NAMES[expected][0]}: `numerate deploy` (or `prefect deploy`) reads it"
        )
    if not keys or keys & _fields(expected) or not keys <= _fields(other):
        return
    shown = ", ".join(sorted(str(key) for key in keys)[:4]) + (", ..." if len(keys) > 4 else "")
    (this, takes), (wanted, _) = _KIND_NAMES[other], _KIND_NAMES[expected]
    raise ConfigError(f"{source} is {this} ({shown}), not {wanted}: `{takes}` takes it")


def _fields(kind: ConfigKind) -> set[str]:
    """The keys a config of `kind` takes. NumGen's are read only when a config is checked
    against them (its module imports numpy and PIL, 0.17 s): not for a sweep config that
    names a key of its own."""
    if kind == "sweep":
        return set(SweepConfig.model_fields)
    from numerate.numgen.config import NumGenConfig

    return set(NumGenConfig.model_fields)


def load_yaml(path: Path, what: str) -> Any:
    """A YAML file's data, read with the safe loader, no aliases and the bounds of
    kernel.inputs (size, depth, digits); ConfigError naming `what`, the path and the line
    when it cannot be read or parsed."""
    return yaml_value(read_text(path, what, limit=MAX_CONFIG_BYTES), f"{what} {path}")


def load_sweep_config(path: str | Path) -> SweepConfig:
    """Read and validate a YAML sweep config."""
    path = Path(path)
    return parse_sweep_config(load_yaml(path, "sweep config"), f"sweep config {path}", yaml=True)


def one_model_config(
    base: SweepConfig,
    model: str,
    base_url: str | None,
    name: str | None = None,
    api_key_env: str | None = None,
) -> SweepConfig:
    """`base` with its models replaced by one (the CLI's --model/--base-url/--api-key-env).
    A run of the built-in sweep is then named after the model, not `baselines`."""
    template = base.models[0].model_dump() if base.models else {}
    label = re.sub(r"[^A-Za-z0-9_.:/@+-]+", "_", model)[:200]  # a model id's label: the id's
    template.update(name=name or label, model=model, base_url=base_url)  # problem said once
    template.update(api_key_env=api_key_env, api_key_secret=None)
    if model.startswith("baseline:"):  # the first model's endpoint settings are not its own
        for field in set(ENDPOINT_ONLY) - {"base_url", "api_key_env"}:  # the options' own
            template[field] = ModelConfig.model_fields[field].default
        for field in SAMPLING_ENDPOINT_ONLY if "sampling" in template else ():
            template["sampling"][field] = Sampling.model_fields[field].default
    data = base.model_dump(mode="json", context=WITH_CREDENTIALS)
    data["models"] = [template]
    if data["name"] == DEFAULT_SWEEP["name"]:
        named = re.sub(r"[^A-Za-z0-9_.-]+", "-", template["name"]).strip("-.")  # a label is
        data["name"] = named[:100].strip("-.") or "model"  # 200 long, a sweep's name 100
    given = {"model": model, "base_url": base_url, "name": name, "api_key_env": api_key_env}
    options = {f"models.0.{field}": f"--{field.replace('_', '-')}"
               for field, value in given.items() if value is not None}  # fmt: skip
    return parse_sweep_config(data, "--model/--base-url", options)


def evaluate_config(
    base: SweepConfig,
    model: str | None = None,
    base_url: str | None = None,
    name: str | None = None,
    manifolds: list[str] | None = None,
    count: int | None = None,
) -> SweepConfig:
    """`base` narrowed for an on-demand run: one model, some manifolds, another count."""
    config = one_model_config(base, model, base_url, name) if model else base
    data = config.model_dump(mode="json", context=WITH_CREDENTIALS)
    if manifolds is not None:
        unknown = sorted(set(manifolds) - {m["manifold"] for m in data["manifolds"]})
        if unknown:
            present = ", ".join(m["manifold"] for m in data["manifolds"])
            raise ConfigError(f"manifolds: {unknown[0]!r} is not in the sweep ({present})")
        data["manifolds"] = [m for m in data["manifolds"] if m["manifold"] in manifolds]
    if count is not None:  # a fixed count replaces adaptive sampling
        for entry in data["manifolds"]:
            entry.update(count=count, precision=None)
    return parse_sweep_config(data, "evaluate parameters")


def split_by_model(config: SweepConfig, results_dir: str) -> list[SweepConfig]:
    """One sweep per model, each publishing its shards to `results_dir`: the parts of a sweep
    that can run on different machines (the cases are the same in every part)."""
    parts = []
    for model in config.models:
        data = config.model_dump(mode="json", context=WITH_CREDENTIALS)
        model_data = model.model_dump(mode="json", context=WITH_CREDENTIALS)
        data.update(models=[model_data], results_dir=results_dir)
        parts.append(parse_sweep_config(data, f"part {model.name!r}"))
    return parts


DEFAULT_SWEEP: dict[str, Any] = {
    "name": "baselines",
    "seed": 42,
    "models": [
        {"name": "random", "model": "baseline:random"},
        {"name": "heuristic", "model": "baseline:heuristic"},
        {"name": "oracle", "model": "baseline:oracle"},
    ],
    "manifolds": [
        {
            "manifold": "objects",
            "count": 50,
            "grid": {"length": [2, 6], "distractor_count": [0, 4]},
        },
        {"manifold": "shuffle", "count": 50, "grid": {"length": [3, 5], "max_depth": [2, 4]}},
        {"manifold": "sequence", "count": 50, "grid": {"seq_length": [2, 4], "num_rules": [1, 2]}},
    ],
}
"""The sweep `numerate run` runs without --config: the baselines, every manifold, a small grid."""
