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
    assert yaml_value("a: [1, -31, +1000, 0, 0.5, .5]\nb: {c: x}\n", "cfg") == {
        "a": [1, -31, 1000, 0, 0.5, 0.5], "b": {"c": "x"},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("written", "read_as"),
    [("1:30", "90"), ("0x10", "16"), ("010", "8"), ("0b11", "3"), ("1_000", "1000"),
     ("00", "0"), ("1_0.5", "10.5"), ("1:30.5", "90.5"), ("1_0e1", "100.0")],
)  # fmt: skip
def test_yaml_1_1_s_other_spellings_of_a_number_are_refused(written, read_as):
    """A hostile pass: `seed: 1:30` was stored as 90 (base 60), `per_number: 1:0` made 60
    images a number, `010` was 8 (octal); `--set` and JSON refuse them. A number is one as
    written, in decimal digits; quoted, it is text."""
    with pytest.raises(ConfigError) as refused:
        yaml_value(f"seed: {written}", "cfg")
    assert str(refused.value) == (
        f"cfg (line 1, column 7): not valid YAML: '{written}' is no number as written, which "
        f"YAML 1.1 reads as {read_as}: write the number in decimal digits, or quote it to give "
        "text"
    )
    assert yaml_value(f"seed: '{written}'", "cfg") == {"seed": written}


def test_yaml_merge_keys_are_refused():
    """A hostile pass: `<<: {seed: 1}` beside `seed: 2` went past the refusal of a key given
    twice (2 was stored), and `<<: [{seed: 1}, {seed: 3}]` stored 3 where YAML says 1."""
    for text in ("<<: {seed: 1}\nseed: 2\n", "a: {<<: [{b: 1}, {b: 3}]}\n"):
        with pytest.raises(ConfigError, match=r"YAML merge keys \(<<\) are not allowed"):
            yaml_value(text, "cfg")


def test_yaml_of_more_values_than_a_config_holds_is_refused_early(monkeypatch):
    """A hostile pass: a 4 MiB list of two million values took 46 s and 1.45 GB to read,
    then was refused as an unknown field. The values are counted as they are read, and the
    refusal points at the first value past the bound, not at the end of the list. (The bound
    is lowered here: reading 100,000 values twice took 14 s of the suite's CPU.)"""
    from numerate.kernel import inputs

    assert inputs.MAX_YAML_VALUES == 100_000  # docs/commands.md says so
    monkeypatch.setattr(inputs, "MAX_YAML_VALUES", 1_000)
    most = 1_000 - 3  # the mapping, its key and the list are values too
    assert len(yaml_value("a: [" + ",".join(["1"] * most) + "]", "c")["a"]) == most
    with pytest.raises(ConfigError, match="more than 1,000 values"):
        yaml_value("a: [" + ",".join(["1"] * (most + 1)) + "]", "cfg")
    past = 4 + 2 * most  # `a: [` and `1,` a value: the column of the value past the bound
    with pytest.raises(ConfigError, match=rf"\(line 1, column {past + 1}\): .*more than 1,000"):
        yaml_value("a: [" + ",".join(["1"] * 2_000_000) + "]", "cfg")


def test_yaml_reads_an_exponent_without_a_dot_as_a_number_as_json_does():
    """Before: `1e-9` was the text '1e-9' (YAML 1.1), refused as "not a valid number"."""
    read = yaml_value("a: [1e-9, -2E3, 1.5e+2, 3.0e-1, 10e1, 12, e5, 1e, '1e-9']", "cfg")
    assert read == {"a": [1e-9, -2000.0, 150.0, 0.3, 100.0, 12, "e5", "1e", "1e-9"]}
    assert [type(value) for value in read["a"][:5]] == [float] * 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "1" * 5000, "(line 1, column 4): not valid YAML: a whole number of more than"),
        ("a: -" + "1" * 101, "a whole number of more than 100 digits"),
        ("a: 0x" + "f" * 100, "'0x" + "f" * 37 + "…' is no number as written: write"),
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
        # a hostile sweep: "not valid YAML: but found another document", the sentence cut
        (
            "name: a\n---\nname: b\n",
            "(line 2, column 1): not valid YAML: expected a single "
            "document in the stream, but found another document",
        ),
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
