import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerate.config.sweep import (
    DEFAULT_SWEEP,
    load_sweep_config,
    names_point,
    one_model_config,
    parse_sweep_config,
)
from numerate.kernel.errors import ConfigError
from numerate.manifolds.common import canonical_params

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "deployments" / "sweeps").glob("*.yaml")))
def test_shipped_sweeps_validate(path):
    config = load_sweep_config(path)
    assert config.total_cases() > 0
    assert {m.manifold for m in config.manifolds} == {"objects", "shuffle", "sequence"}


def test_default_sweep_needs_no_network():
    config = parse_sweep_config(DEFAULT_SWEEP)
    assert all(m.is_baseline for m in config.models)


def base(**changes):
    data = {"name": "t", "models": [{"name": "a", "model": "baseline:random"}],
            "manifolds": [{"manifold": "objects", "count": 2}]}  # fmt: skip
    data.update(changes)
    return data


def test_grid_is_a_cartesian_product_with_fixed_scalars():
    config = parse_sweep_config(
        base(manifolds=[{"manifold": "objects", "count": 2,
                         "grid": {"length": [2, 4], "anchor": ["NONE", "ROMAN"], "max_count": 3}}])
    )  # fmt: skip
    points = config.manifolds[0].points()
    assert [key for key, _ in points] == [
        "anchor=NONE,length=2,max_count=3", "anchor=NONE,length=4,max_count=3",
        "anchor=ROMAN,length=2,max_count=3", "anchor=ROMAN,length=4,max_count=3",
    ]  # fmt: skip
    assert all(p.max_count == 3 and p.count == 2 for _, p in points)
    assert config.total_cases() == 8


def test_a_grid_point_its_manifold_refuses_is_named_by_its_key():
    """A hostile sweep: a check of a whole point named it as a Python dict
    (`grid point {'distractor_count': 99, 'length': 4}`), not as the point's key."""
    config = base(manifolds=[{"manifold": "objects", "count": 2,
                              "grid": {"length": [4], "distractor_count": [0, 99]}}])  # fmt: skip
    with pytest.raises(ConfigError, match=r"grid point distractor_count=99,length=4: "):
        parse_sweep_config(config)


def test_a_control_character_in_a_grid_value_is_written_as_its_escape_in_the_point_key():
    """A point's key goes with its answers into shards, which hold no control character but a
    tab or a newline in it: a CRLF prefix, or an ESC, is in the prompt as given and in the
    key as its escape (refusing it refused configs that ran before)."""
    config = parse_sweep_config({
        "name": "x", "models": [{"name": "o", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": "shuffle", "count": 1, "grid": {
            "anchor": ["NUMERIC"], "anchor_prefix": ["\r\n", "\t"], "anchor_suffix": "\x1b."}}],
    })  # fmt: skip
    keys = [key for key, _ in config.manifolds[0].points()]
    assert keys == [
        "anchor=NUMERIC,anchor_prefix=\\r\n,anchor_suffix=\\x1b.",
        "anchor=NUMERIC,anchor_prefix=\t,anchor_suffix=\\x1b.",
    ]
    params = config.manifolds[0].points()[0][1]
    assert params.anchor_prefix == "\r\n" and params.anchor_suffix == "\x1b."  # as given


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "has space"}, "name = 'has space'"),
        ({"models": []}, "models"),
        ({"models": [{"name": "a", "model": "baseline:smart"}]}, "not a baseline"),
        ({"models": [{"name": "a", "model": "m", "base_url": "ftp://x"}]}, "must start with http"),
        # a hostile pass: Prefect's client could not make the limit's URL of these (exit 1)
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/v1",
                      "concurrency_limit": "a\x1bb"}]},
         "concurrency_limit = 'a\\x1bb': not a name numerate takes (1 to 200 characters, no "
         "control character"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/v1",
                      "concurrency_limit": ""}]},
         "concurrency_limit = '': not a name numerate takes (1 to 200 characters"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/v1",
                      "concurrency_limit": "a" * 100_000}]}, "concurrency_limit = 'aaa"),
        ({"models": [{"name": "a", "model": "baseline:random"}] * 2}, "used twice"),
        ({"models": [{"name": "a", "model": "baseline:random", "colour": 1}]}, "colour"),
        ({"manifolds": [{"manifold": "objects", "grid": {"count": [1, 2]}}]}, "grid.count"),
        ({"manifolds": [{"manifold": "objects", "grid": {"length": []}}]}, "at least one value"),
        ({"manifolds": [{"manifold": "shuffle", "grid": {"anchor": ["UPSIDE_DOWN"]}}]},
         "grid.anchor = 'UPSIDE_DOWN'"),
        ({"batch_size": 0}, "batch_size = 0"),
        ({"manifolds": [{"manifold": "objects", "grid": {"length": [3, 3]}}]},
         "grid: the points length=3 and length=3 are the same point"),
        ({"manifolds": [{"manifold": "objects", "grid": {"prob_adjective": [0.0, -0.0]}}]},
         "grid: the points prob_adjective=0.0 and prob_adjective=-0.0 are the same point"),
        # a point's key goes with its answers into shards, which hold no longer nor control text
        ({"manifolds": [{"manifold": "shuffle", "grid": {"anchor": ["NUMERIC"],
                                                         "anchor_prefix": ["p" * 10_000]}}]},
         "grid.anchor_prefix = 'ppp"),
        ({"manifolds": [{"manifold": "shuffle", "grid": {"anchor": ["NUMERIC"],
                                                         "anchor_prefix": ["p" * 10_000]}}]},
         "the values take 10,029 characters, more than the 10,000 a grid point's name"),
        ({"manifolds": [{"manifold": "objects", "count": 2}, {"manifold": "objects", "count": 3}]},
         "entries 0 and 1 both hold the objects point default"),
        # a hostile pass: two points' answers were stored, summarized and compared as one's
        ({"manifolds": [{"manifold": "objects", "grid": {
            "anchor": ["ALPHA"], "anchor_prefix": ["a", "a,anchor_suffix=b"],
            "anchor_suffix": ["b,anchor_suffix=c", "c"]}}]},
         "grid: two different points are both named anchor=ALPHA,anchor_prefix=a,anchor_suffix="
         "b,anchor_suffix=c (a text value holding ',' or '=' spells another point's name"),
        ({"manifolds": [
            {"manifold": "objects", "grid": {"anchor": ["ALPHA"],
                                             "anchor_prefix": ["a,anchor_suffix=b"]}},
            {"manifold": "objects", "grid": {"anchor": ["ALPHA"], "anchor_prefix": ["a"],
                                             "anchor_suffix": ["b"]}}]},
         "manifolds: objects grid: two different points are both named anchor=ALPHA,"
         "anchor_prefix=a,anchor_suffix=b ("),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/v1",
                      "system_prompt": "y" * 600_000}]}, "the sweep config is 600,"),
        ({"models": [{"name": "o", "model": "baseline:oracle", "timeout_s": 5}]},
         "timeout_s: model 'o' is baseline:oracle, which asks no endpoint"),
        ({"manifolds": [{"manifold": "objects", "grid": {"prob_adjective": [float("nan")]}}]},
         "grid.prob_adjective = nan: Input should be a finite number"),
        ({"models": [{"name": "o", "model": "baseline:oracle", "base_url": "http://h/v1"}]},
         "base_url: model 'o' is baseline:oracle, which asks no endpoint"),
        ({"models": [{"name": "o", "model": "baseline:random", "api_key_env": "KEY"}]},
         "api_key_env: model 'o' is baseline:random, which asks no endpoint"),
        ({"models": [{"name": "o", "model": "baseline:random", "concurrency": 4}]},
         "concurrency: model 'o' is baseline:random, which asks no endpoint"),
        ({"models": [{"name": "o", "model": "baseline:oracle", "concurrency_limit": "gpu"}]},
         "concurrency_limit: model 'o' is baseline:oracle, which asks no endpoint"),
        ({"models": [{"name": "o", "model": "baseline:heuristic",
                      "sampling": {"temperature": 0.7}}]},
         "sampling.temperature: model 'o' is baseline:heuristic, which asks no endpoint"),
        ({"models": [{"name": "o", "model": "baseline:random", "sampling": {"max_tokens": 64}}]},
         "sampling.max_tokens: model 'o' is baseline:random, which asks no endpoint"),
        ({"batch_size": True}, "batch_size = true: Input should be a valid integer"),
        ({"batch_size": "200"}, "batch_size = '200': Input should be a valid integer"),
        ({"batch_size": 200.0}, "batch_size = 200.0: Input should be a valid integer"),
        ({"seed": 2**63}, "seed = 9223372036854775808: Input should be less than or equal"),
        ({"view_dir": " "}, "view_dir = ' ': give a folder"),
        ({"results_dir": ""}, "results_dir = '': give a folder"),
        ({"view_dir": "v\x1b]0;t\x07"}, "view_dir = 'v\\x1b]0;t\\x07': a path with a control"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h", "timeout_s": True}]},
         "timeout_s = true: Input should be a valid number"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h",
                      "sampling": {"max_tokens": "64"}}]},
         "sampling.max_tokens = '64': Input should be a valid integer"),
        ({"manifolds": [{"manifold": "objects", "grid": {"length": [True, 2]}}]},
         "length = true: Input should be a valid integer"),
        ({"manifolds": [{"manifold": "objects", "grid": {"prob_adjective": ["0.5"]}}]},
         "prob_adjective = '0.5': Input should be a valid number"),
        # a query was kept in front of every request path (`/v1?token=X/models`)
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/v1?token=X"}]},
         "holds a query or fragment ('?' or '#')"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/v1#x"}]},
         "holds a query or fragment"),
        # the key was silently not sent: basic authentication took the Authorization header
        ({"models": [{"name": "a", "model": "m", "base_url": "http://u:pw@h/v1",
                      "api_key_env": "KEY"}]},
         "base_url = 'http://***@h/v1' holds user:password@ and api_key_env names a key"),
        # corpus H: sent as `us:er:pw`, which a server reads as user `us`, password `er:pw`
        ({"models": [{"name": "a", "model": "m", "base_url": "http://us%3Aer:pw@h/v1"}]},
         "base_url = 'http://***@h/v1' is not a valid URL: its user name holds a colon (%3A)"),
        # corpus K: a port that is no number, said to be "user information that is no ..."
        ({"models": [{"name": "a", "model": "m", "base_url": "http://u:pw@127.0.0.1:bad/v1"}]},
         "base_url = 'http://***@127.0.0.1:bad/v1' is not a valid URL: Port could not be cast "
         "to integer value as 'bad'"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://u:p/w@h:1/v1"}]},
         "is not a valid URL: a '/', '?' or '#' before its '@': in a user name or password, "
         "write them percent-encoded"),
        # a host httpx's IDNA decoding refuses: a traceback from inside the endpoint check
        ({"models": [{"name": "a", "model": "m", "base_url": "http://xn--zz.example/v1"}]},
         "base_url = 'http://xn--zz.example/v1' is not a valid URL: a malformed punycode label "
         "in its host (Invalid A-label)"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://u:pw@XN--ls8h.la/v1"}]},
         "base_url = 'http://***@XN--ls8h.la/v1' is not a valid URL: a malformed punycode "
         "label in its host (Codepoint U+1F4A9"),
        # httpx raised "URL too long" from inside the endpoint check; the URL is cut, not why
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/" + "a" * 70_000}]},
         "a… is not a valid URL: it is 70,009 characters long; at most 8,192"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h/" + "a" * 5_000 + "?x"}]},
         "a… holds a query or fragment ('?' or '#')"),
        ({"models": [{"name": "a", "model": "m", "base_url": "http://h", "system_prompt": ""}]},
         "system_prompt = '': String should have at least 1 character"),
        ({"models": [{"name": "a", "model": "m", "base_url": ""}]}, "base_url = '' is empty"),
        # pydantic named its class: "a valid dictionary or instance of ModelConfig"
        ({"models": [[1]]}, "models.0: should be a mapping of settings (not a list)"),
    ],
)  # fmt: skip
def test_bad_values_name_their_field(changes, message):
    with pytest.raises(ConfigError, match=None) as info:
        parse_sweep_config(base(**changes), "sweep config x.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("sweep config x.yaml: ")


def test_a_key_of_any_size_or_with_escapes_is_named_in_a_line_a_terminal_shows_as_it_is():
    """A config's keys are the user's file: a 3 MB key was said whole (3 MB on standard
    error), and a key holding an escape sequence reached the terminal raw (it could set its
    title or clear it). A key is now cut, and one holding such characters written escaped."""
    long_key, escape_key = "C" * 3_000_000, "\x1b]0;PWNED\x07"
    with pytest.raises(ConfigError) as info:
        parse_sweep_config(base(**{long_key: 1, escape_key: 1}), "sweep config x.yaml")
    said = str(info.value)
    assert len(said) < 400
    assert "CCCCCCCCCC" in said and "\x1b" not in said and "'\\x1b]0;PWNED\\x07'" in said


def test_yaml_errors_say_where(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nmodels:\n  - name: a\n   model: b\n")
    with pytest.raises(ConfigError, match=r"line \d+, column \d+"):
        load_sweep_config(path)


def yaml_refused(path: Path, text: str) -> str:
    """What loading the sweep config `text`, written to `path`, is refused with."""
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_sweep_config(path)
    return str(info.value)


def test_an_unquoted_date_that_yaml_reads_as_a_date_says_to_quote_it(tmp_path):
    """A hostile pass: a checkpoint's date as its `revision` (or a date as a name) said
    "revision = datetime.date(2024, 6, 1): Input should be a valid string", Python's words."""
    path = tmp_path / "s.yaml"
    model = "{name: a, model: m, base_url: 'http://127.0.0.1:9/v1', revision: 2024-06-01}"
    said = yaml_refused(path, f"name: x\nmodels: [{model}]\nmanifolds: [{{manifold: objects}}]\n")
    assert said.endswith(
        "models.0.revision = 2024-06-01: Input should be a valid string (YAML reads an "
        "unquoted date as a date: put it in quotes)"
    )
    path.write_text(path.read_text().replace("2024-06-01", "'2024-06-01'"))
    assert load_sweep_config(path).models[0].revision == "2024-06-01"


def test_a_key_that_is_no_name_is_said_to_be_one(tmp_path):
    """A hostile pass: a top-level `1: x` said "1 = 1: Keys should be strings"."""
    path = tmp_path / "s.yaml"
    said = yaml_refused(path, "name: x\n1: x\nmodels: [{name: a, model: 'baseline:oracle', "
                              "2: 3}]\nmanifolds: [{manifold: objects}]\n")  # fmt: skip
    rule = "a setting's name is text, not a number"
    assert said.splitlines() == [
        f"sweep config {path}: key 2 of models.0: {rule}", f"sweep config {path}: key 1: {rule}"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("grid", "said"),
    [
        ("{anchor: 2020-01-01}", "grid.anchor = 2020-01-01: a grid value is text, a number, true, "
         "false or null, not a date (YAML reads an unquoted date as a date: put it in quotes)"),
        ("{length: [4, 2020-01-01]}", "grid.length = 2020-01-01: a grid value is text"),
        ("{length: {a: 1}}", 'grid.length = {"a": 1}: a grid value is text, a number, true, '
         "false or null, not a mapping"),
        ("{length: [[4]]}", "grid.length = [4]: a grid value is text, a number, true, false or "
         "null, not a list"),
        ("{length: null}", "grid.length = null: Input should be a valid integer"),
        ("{2020-01-01: 3}", "key 2020-01-01 of manifolds.0.grid: a setting's name is text, not a "
         "date (YAML reads an unquoted date as a date: put it in quotes)"),
    ],
)  # fmt: skip
def test_a_grid_value_that_is_no_value_is_named_as_yaml_writes_it(tmp_path, grid, said):
    """A hostile pass: a date in a grid ended `run` in a traceback (its point key is JSON);
    null and a mapping were shown as Python writes them (None, {'a': 1}), and a date key as
    `manifolds.0.grid.datetime.date(2020, 1, 1).[key]`."""
    path = tmp_path / "s.yaml"
    models = "[{name: a, model: 'baseline:oracle'}]"
    text = f"name: x\nmodels: {models}\nmanifolds: [{{manifold: objects, grid: {grid}}}]\n"
    assert said in yaml_refused(path, text)


def test_a_key_of_null_is_not_said_to_be_an_empty_document(tmp_path):
    said = yaml_refused(tmp_path / "s.yaml", "null: 2\nname: x\n")
    assert "key null: a setting's name is text, not null" in said


def test_an_unquoted_off_that_yaml_reads_as_false_says_to_quote_it(tmp_path):
    """`cache: off` said "models.0.cache = False: Input should be 'resume', 'reuse' or 'off'"."""
    path = tmp_path / "s.yaml"
    said = yaml_refused(path, "name: x\nmodels: [{name: a, model: 'baseline:oracle', cache: off}]"
                              "\nmanifolds: [{manifold: objects, count: 3}]\n")  # fmt: skip
    assert "models.0.cache = false: Input should be" in said
    assert said.endswith("or off as true or false: put the word in quotes)")
    path.write_text(path.read_text().replace("cache: off", "cache: 'off'"))
    assert load_sweep_config(path).models[0].cache == "off"
    with pytest.raises(ConfigError) as info:  # JSON (a deployment's parameters): no YAML there
        parse_sweep_config(base(models=[{"name": "a", "model": "m", "cache": False}]))
    assert "cache = false: Input should be" in str(info.value)
    assert "YAML" not in str(info.value)


def test_fingerprint_ignores_db_but_not_content():
    a = parse_sweep_config(base())
    b = parse_sweep_config(base(db="elsewhere.duckdb"))
    c = parse_sweep_config(base(seed=9))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_one_model_override():
    config = one_model_config(parse_sweep_config(base()), "served-id", "http://127.0.0.1:1/v1")
    assert [(m.name, m.model_id, m.base_url) for m in config.models] == [
        ("served-id", "served-id", "http://127.0.0.1:1/v1")
    ]
    with pytest.raises(ConfigError, match="needs a base_url"):
        one_model_config(parse_sweep_config(base()), "served-id", None)


@pytest.mark.parametrize("name", [None, "n" * 150])
def test_a_long_model_label_from_the_command_line_names_its_sweep_within_bounds(name):
    """A hostile pass: a label of 101-200 characters, which a model's name allows, was refused
    for the sweep's name made of it (at most 100), a name the user never gave."""
    served = "org/" + "m" * 150
    config = one_model_config(parse_sweep_config(DEFAULT_SWEEP), served, "http://h:1/v1", name)
    assert config.models[0].name == (name or "org/" + "m" * 150)
    assert config.name == ("n" * 100 if name else "org-" + "m" * 96)


def test_a_baseline_from_the_command_line_takes_none_of_the_first_models_endpoint_settings():
    """`--model baseline:random` over a config whose first model is an endpoint: its
    concurrency and sampling temperature would be refused on a baseline, so they are left
    behind; the number of samples per case (a design choice, not an endpoint's) is kept."""
    endpoint = {
        "name": "a",
        "model": "m",
        "base_url": "http://127.0.0.1:1/v1",
        "concurrency": 8,
        "concurrency_limit": "gpu",
        "max_error_rate": 0.5,
        "sampling": {"temperature": 0.7, "max_tokens": 64, "samples": 3, "seed": 5},
    }
    config = one_model_config(parse_sweep_config(base(models=[endpoint])), "baseline:random", None)
    (model,) = config.models
    assert (model.model_id, model.concurrency, model.concurrency_limit) == (
        "baseline:random",
        16,
        None,
    )
    assert (model.sampling.temperature, model.sampling.max_tokens) == (0.0, 2048)
    assert (model.sampling.samples, model.sampling.seed) == (3, 5)  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"count": 20, "precision": {"ci_width": 0.1}}, "manifolds.0: count and precision"),
        ({"precision": {"ci_width": 0}}, "manifolds.0.precision.ci_width = 0"),
        ({"precision": {}}, "manifolds.0.precision.ci_width: Field required"),
        ({"precision": {"ci_width": 0.1, "min_count": 50, "max_count": 10}},
         "max_count = 10 is below min_count = 50"),
    ],
)  # fmt: skip
def test_precision_is_checked_and_excludes_count(entry, message):
    data = {"name": "x", "models": [{"name": "o", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": "objects", **entry}]}  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        parse_sweep_config(data)


def test_an_adaptive_entry_plans_up_to_max_count_and_survives_a_round_trip():
    data = {"name": "x", "models": [{"name": "o", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": "objects", "precision": {"ci_width": 0.1}},
                          {"manifold": "sequence"}]}  # fmt: skip
    config = parse_sweep_config(data)
    assert [m.count for m in config.manifolds] == [None, 20]
    assert config.manifolds[0].planned_count == 400
    again = parse_sweep_config(config.model_dump(mode="json"))
    assert again.fingerprint() == config.fingerprint()


def test_a_model_s_id_is_model_in_a_config_file_and_model_id_in_code():
    """`model` in YAML (and in the stored config, so fingerprints do not change), `model_id`
    as an attribute, as the results name it; a file keeps one spelling (`model_id` is an
    unknown key there)."""
    model = parse_sweep_config(base()).models[0]
    assert model.model_id == "baseline:random"
    assert model.model_dump()["model"] == "baseline:random"
    assert "model_id" not in model.model_dump()
    named = base(models=[{"name": "m", "model_id": "served-id", "base_url": "http://x"}])
    with pytest.raises(ConfigError, match="model_id"):
        parse_sweep_config(named)


def test_a_base_urls_password_stays_out_of_json_and_the_fingerprint():
    """What leaves the process as JSON (Prefect's flow run parameters, the stored config) shows
    no password; configs rebuilt in the process keep it; the fingerprint ignores it (a run
    resumes after a password change) but not the host."""
    from numerate.config.sweep import WITH_CREDENTIALS, evaluate_config, split_by_model

    def config(url):
        models = [{"name": "m", "model": "m", "base_url": url}]
        manifolds = [{"manifold": "objects", "count": 2}]
        return parse_sweep_config({"name": "s", "models": models, "manifolds": manifolds})

    secret = config("http://user:pa55-w0rd@10.0.0.1:8000/v1")
    assert "pa55-w0rd" not in secret.model_dump_json()
    assert "pa55-w0rd" not in json.dumps(secret.model_dump(mode="json"))
    assert secret.model_dump(mode="json")["models"][0]["base_url"] == "http://***@10.0.0.1:8000/v1"
    kept = secret.model_dump(mode="json", context=WITH_CREDENTIALS)
    assert kept["models"][0]["base_url"] == "http://user:pa55-w0rd@10.0.0.1:8000/v1"
    assert evaluate_config(secret, count=3).models[0].base_url == secret.models[0].base_url
    [part] = split_by_model(secret, "shards")
    assert part.models[0].base_url == secret.models[0].base_url
    assert secret.fingerprint() == config("http://user:other@10.0.0.1:8000/v1").fingerprint()
    assert secret.fingerprint() != config("http://user:pa55-w0rd@10.0.0.2:8000/v1").fingerprint()


@pytest.mark.parametrize("field", ["timeout_s", "throttle_budget_s", "max_error_rate"])
@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_an_infinite_or_nan_number_is_refused(field, value):
    """`timeout_s: .inf` would let a request that never answers wait forever."""
    models = [{"name": "m", "model": "m", "base_url": "http://127.0.0.1:9/v1", field: value}]
    with pytest.raises(ConfigError, match=f"models.0.{field} = (inf|nan): .*finite"):
        parse_sweep_config({"name": "s", "models": models,
                            "manifolds": [{"manifold": "objects", "count": 2}]})  # fmt: skip


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ({"base_url": "http://127.0.0.1:9/v1\r\nX-Evil: 1"}, "holds a space, a control"),
        ({"base_url": "http://127.0.0.1:9/v1", "api_key_env": ""}, "api_key_env"),
        ({"base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY KEY"}, "api_key_env"),
    ],
)
def test_a_model_field_no_request_could_use_is_refused(model, said):
    models = [{"name": "m", "model": "m", **model}]
    with pytest.raises(ConfigError, match=said):
        parse_sweep_config({"name": "s", "models": models,
                            "manifolds": [{"manifold": "objects", "count": 2}]})  # fmt: skip


def test_a_sweep_name_longer_than_a_file_name_can_hold_is_refused():
    models = [{"name": "m", "model": "baseline:oracle"}]
    with pytest.raises(ConfigError, match="name"):
        parse_sweep_config({"name": "s" * 300, "models": models,
                            "manifolds": [{"manifold": "objects", "count": 2}]})  # fmt: skip


@pytest.mark.parametrize(
    "url",
    [
        "http://admin:hunter2 secret@127.0.0.1:18777/v1",
        "http://admin:hun/ter2@127.0.0.1:18777/v1",
        "http://u:hunter2#x@127.0.0.1:9/v1",
        "http://u:hunter2?x@127.0.0.1:9/v1",
        "ftp://u:hunter2@127.0.0.1/v1",
        "http://u:hunter2\n@127.0.0.1/v1",
    ],
)
def test_a_refused_base_url_never_shows_its_password(url):
    """A password with a space, `/`, `#` or `?` is no well-formed user information: the URL
    was refused with the password in the message (and its port error quoted part of it)."""
    config = base(models=[{"name": "m", "model": "m", "base_url": url}])
    with pytest.raises(ConfigError) as raised:
        parse_sweep_config(config, "s.yaml")
    assert "hunter2" not in str(raised.value) and "hun" not in str(raised.value)
    assert "***@" in str(raised.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [("", "got nothing (an empty document, or comments only)"),
     ("# a comment\n", "got nothing (an empty document"),
     ("- a\n", "got a list"), ("7\n", "got a number")],
)  # fmt: skip
def test_a_config_that_is_no_mapping_says_what_it_is(tmp_path, text, said):
    """Before: an empty config file was said to be `got NoneType`."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_sweep_config(path)
    assert f"expected a mapping at the top, {said}" in str(info.value)


def test_a_numgen_config_given_as_a_sweep_config_is_one_line_saying_so():
    """Corpus J: each of its keys was an error of its own (name, models and manifolds missing,
    generator, detector and prompts not permitted): six lines that never said what it was."""
    data = {"generator": "synthetic", "detector": "synthetic", "prompts": {"per_number": 1}}
    with pytest.raises(ConfigError) as error:
        parse_sweep_config(data, "sweep config ng.yaml")
    assert str(error.value) == (
        "sweep config ng.yaml is a NumGen config (detector, generator, prompts), not a sweep "
        "config: `numerate numgen run --config` takes it"
    )


def test_a_sweep_config_with_one_stray_numgen_key_gets_the_usual_error():
    with pytest.raises(ConfigError) as error:
        parse_sweep_config(base(generator="synthetic"))
    assert "generator = 'synthetic': Extra inputs are not permitted" in str(error.value)
    assert "NumGen config" not in str(error.value)


def test_a_prefect_deployment_file_given_as_a_sweep_config_is_one_line_saying_so():
    """Corpus L: `run --config deployments/prefect.yaml` gave five lines, one a key."""
    with pytest.raises(ConfigError) as error:
        load_sweep_config(ROOT / "deployments" / "prefect.yaml")
    assert str(error.value).endswith(
        "prefect.yaml is a Prefect deployment file (prefect-version, deployments), not a "
        "sweep config: `numerate deploy` (or `prefect deploy`) reads it"
    )
    assert "\n" not in str(error.value)


GRID_VALUES = {
    "length": st.lists(st.integers(1, 9), min_size=1, max_size=2, unique=True),
    "prob_adjective": st.lists(st.sampled_from([0, 1, 0.5, 0.25, 1.0]), min_size=1,
                               max_size=2, unique=True),  # an int stands for a float
    "anchor_prefix": st.lists(st.sampled_from(["\n", ",", "x,length=3", "=", "\r\n", ""]),
                              min_size=1, max_size=2, unique=True),  # commas and = in values
    "anchor_suffix": st.lists(st.text(max_size=4), min_size=1, max_size=2, unique=True),
}  # fmt: skip


@given(
    grid=st.dictionaries(st.sampled_from(sorted(GRID_VALUES)), st.none(), max_size=3).flatmap(
        lambda axes: st.fixed_dictionaries({axis: GRID_VALUES[axis] for axis in axes})
    )
)
@settings(max_examples=200, deadline=None)
def test_a_point_key_names_its_own_point_and_no_other(grid):
    """What `numerate ingest` checks an answer's point key by (a key forged to count answers
    at another point is refused), whatever axes a sweep names: another sweep of the same
    case may name others, or values holding commas and `=`."""
    grid["anchor"] = ["ROMAN", "HEX"]  # markers: a prefix and a suffix shape them
    config = parse_sweep_config(base(manifolds=[{"manifold": "objects", "count": 1,
                                                 "grid": grid}]))  # fmt: skip
    points = [(key, canonical_params(p)) for key, p in config.manifolds[0].points()]
    for key, params in points:
        assert names_point(key, params), (key, params)
        for _, other in points:
            if other != params:
                assert not names_point(key, other), (key, other)


def test_a_point_key_naming_other_axes_of_the_same_point_names_it():
    params = {"length": 3, "max_depth": 4, "confounding_count": 0, "anchor": "NONE"}
    for key in ("default", "length=3", "length=3,max_depth=4",
                "confounding_count=0,length=3,max_depth=4"):  # fmt: skip
        assert names_point(key, params), key
    for key in ("forged", "length=4", "max_depth=4,length=3", "length=3,", "length=3,max_depth",
                "length=3,max_depth=4,size=1", ""):  # fmt: skip
        assert not names_point(key, params), key


def test_a_valid_punycode_host_and_a_url_at_the_bound_pass():
    """The checks refuse what the HTTP client cannot send, not an internationalised name."""
    at_bound = "http://h/" + "a" * (8_192 - len("http://h/"))
    # httpx decodes a host that begins with xn-- only; a label further in is sent as it is
    hosts = ("http://xn--mller-kva.de/v1", "https://u:p@xn--fiqs8s.icom.museum/v1",
             "http://api.xn--ls8h.la/v1", "http://my_host.xn--mller-kva.de/v1")  # fmt: skip
    for url in (*hosts, at_bound):
        config = parse_sweep_config(base(models=[{"name": "a", "model": "m", "base_url": url}]))
        assert config.models[0].base_url.endswith(url[-20:])


def test_a_base_url_s_scheme_is_read_in_any_case_and_kept_in_lower_case():
    """A URL's scheme is case-insensitive (a hostile pass: `HTTP://` was refused); written in
    lower case, it asks and keys the same endpoint as `http://`."""
    for url, kept in (("HTTP://h:8000/v1", "http://h:8000/v1"), ("HttpS://H/v1", "https://H/v1")):
        config = parse_sweep_config(base(models=[{"name": "a", "model": "m", "base_url": url}]))
        assert config.models[0].base_url == kept


def test_a_sweep_holds_at_most_max_points_grid_points_in_all_refused_before_any_is_made():
    """A hostile sweep: ten entries of 89,910 points each (each under the entry's bound) took
    2.2 GB while the first was still being planned. The points of all entries are counted
    from their grids, before any is made; one entry over the bound is said with its axes."""
    grid = {"length": list(range(2, 9)), "distractor_count": list(range(10)),
            "prob_adjective": [i / 1000 for i in range(1000)]}  # fmt: skip
    entries = [{"manifold": "objects", "count": 1, "grid": grid}] * 10  # its repeats unseen:
    with pytest.raises(ConfigError) as info:  # refused for its size before any point is made
        parse_sweep_config(base(manifolds=entries), "sweep config x.yaml")
    assert str(info.value) == (
        "sweep config x.yaml: manifolds: 700,000 grid points in all, more than 100,000 (each "
        "new point is measured as it is planned, about 0.1 s a point: split the sweep)"
    )
    with pytest.raises(ConfigError, match="700,000 grid points in all"):  # Python's tuple
        parse_sweep_config(base(manifolds=tuple(entries)), "sweep config x.yaml")
    small = {"manifold": "objects", "count": 1, "grid": {"length": [2, 3]}}
    shuffle = {"manifold": "shuffle", "count": 1, "grid": {"length": [3, 4]}}
    assert len(parse_sweep_config(base(manifolds=[small, shuffle])).manifolds) == 2
