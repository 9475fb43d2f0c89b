"""kernel.inputs: parsing untrusted input within bounds (size, depth, digits)."""

import json
import re

import pytest

from numerate.kernel.errors import ConfigError
from numerate.kernel.inputs import (
    MAX_DEPTH,
    MAX_INTEGER_DIGITS,
    InputLimitError,
    check_depth,
    json_value,
    whole_number,
    yaml_value,
)


def nested(depth):
    return "[" * depth + "]" * depth


def test_json_within_the_bounds_is_read_as_json():
    assert json_value('{"a": [1, -2.5, "x", null]}', "w") == {"a": [1, -2.5, "x", None]}
    assert json_value("9" * MAX_INTEGER_DIGITS, "w") == int("9" * MAX_INTEGER_DIGITS)
    assert json_value(nested(MAX_DEPTH), "w") is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1" * (MAX_INTEGER_DIGITS + 1), "a whole number of 101 digits"),
        ("-" + "1" * 5000, "a whole number of 5,000 digits"),
        ('{"a": [' + "7" * 5000 + "]}", "5,000 digits"),
        (nested(MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels deep"),
        (nested(100_000), "nested more than"),
        ('{"a":' * 100 + "1" + "}" * 100, "nested more than"),
    ],
)
def test_json_beyond_a_bound_names_where(text, message):
    with pytest.raises(InputLimitError, match=message) as raised:
        json_value(text, "f.jsonl line 3")
    assert str(raised.value).startswith("f.jsonl line 3: ")


@pytest.mark.parametrize(
    "read",
    [lambda: yaml_value('a: [ok, "x\\ud800"]', "c.yaml"),
     lambda: yaml_value('"\\udc00": 1', "c.yaml"),
     lambda: json_value('{"a": {"b": "\\ud800"}}', "c.yaml")],
)  # fmt: skip
def test_a_lone_surrogate_is_refused_where_input_is_read(read):
    """Half of a surrogate pair is no character: a config holding one ended a run in a
    UnicodeEncodeError traceback."""
    with pytest.raises(ConfigError, match=re.escape("c.yaml: a text holds \\ud")):
        read()


def test_a_json_key_given_twice_is_refused_at_any_depth():
    """json.loads keeps the last of two values silently; a graded line or --set value with a
    key twice is ambiguous, so it is refused naming the key."""
    with pytest.raises(ConfigError, match=re.escape("f.jsonl line 2: the key 'a' appears twice")):
        json_value('{"b": {"a": 1, "a": 2}}', "f.jsonl line 2")
    assert json_value('{"a": {"a": 1}, "b": [{"a": 2}]}', "w") == {"a": {"a": 1}, "b": [{"a": 2}]}


def test_json_that_is_too_long_and_json_that_is_not_json():
    with pytest.raises(InputLimitError, match="at most 10 allowed"):
        json_value('"' + "x" * 20 + '"', "w", limit=10)
    with pytest.raises(json.JSONDecodeError):
        json_value("{", "w")


def test_yaml_within_the_bounds():
    assert yaml_value("a: [1, 0x1f, 1_000]\nb: {c: x}\n", "cfg") == {
        "a": [1, 31, 1000], "b": {"c": "x"},
    }  # fmt: skip


def test_yaml_reads_an_exponent_without_a_dot_as_a_number_as_json_does():
    """Before: `1e-9` was the text '1e-9' (YAML 1.1), refused as "not a valid number"."""
    read = yaml_value("a: [1e-9, -2E3, 1.5e+2, 3.0e-1, 1_0e1, 12, e5, 1e, '1e-9']", "cfg")
    assert read == {"a": [1e-9, -2000.0, 150.0, 0.3, 100.0, 12, "e5", "1e", "1e-9"]}
    assert [type(value) for value in read["a"][:5]] == [float] * 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "1" * 5000, "(line 1, column 4): not valid YAML: a whole number of more than"),
        ("a: -" + "1" * 101, "a whole number of more than 100 digits"),
        ("a: 0x" + "f" * 100, "a whole number of more than 100 digits"),
        ("a: " + "[" * 100_000, "nested more than 64 levels deep"),
        ("a: " + "{b: " * 70 + "1" + "}" * 70, "nested more than 64 levels deep"),
        ("a: &x [1]\nb: *x\n", "YAML aliases (*name) are not allowed"),
        ("a: 2024-13-45\n", "not valid YAML: month must be in 1..12"),
        ("a: [\n", "not valid YAML"),
        ("a: 1\nb: x\x00y\n", "(line 2, column 5): not valid YAML: the character '\\x00' is not"),
        ("name: !!binary aGVsbG8=\n", "(line 1, column 7): not valid YAML: the tag !!binary is"),
        ("models: !!set {a, b}\n", "not valid YAML: the tag !!set is not allowed"),
        ("a: 1\nb: 2\na: 3\n", "(line 3, column 1): not valid YAML: the key 'a' appears twice"),
        ("m:\n  - {n: 1, n: 2}\n", "(line 2, column 12): not valid YAML: the key 'n' appears"),
    ],
)
def test_yaml_beyond_a_bound_or_broken_is_one_config_error(text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        yaml_value(text, "sweep config s.yaml")


def test_whole_numbers_and_depth_checks():
    assert whole_number(" 42 ", "w") == 42
    for odd in ("4x", "+1", "1_000", "\u0663", "", "-"):  # int() takes the middle three
        with pytest.raises(ValueError):
            whole_number(odd, "w")
    assert whole_number("-7", "w") == -7
    with pytest.raises(InputLimitError, match="w: a whole number of 5,000 digits"):
        whole_number("1" * 5000, "w")
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InputLimitError, match="nested more than 64"):
        check_depth(deep, "w")
    check_depth({"a": [[1]]}, "w", limit=3)
