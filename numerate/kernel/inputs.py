"""Parsing untrusted input within bounds: every YAML file, JSON value and whole number a user
gives numerate is read here, with a maximum size, nesting depth and number of digits.

Without the bounds a few kilobytes of input end in a traceback instead of an error line:
Python refuses to convert integers of more than 4,300 digits (ValueError), and nesting a few
thousand levels deep exhausts the recursion limit of any code that walks the value.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field, Strict

from numerate.kernel.errors import ConfigError, shorten


def has_control_character(text: str) -> bool:
    """Whether `text` holds an ASCII control character (a newline, a NUL, an escape sequence's
    ESC, DEL): no name, path or value numerate takes from a user holds one."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


LINE_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f"
"""The control characters a one-line text numerate stores may not hold, as a regular
expression's character ranges (a tab and a newline it may): NUL, a terminal's ESC and BEL."""
MAX_FIELD_CHARS = 10_000
"""The most characters of a one-line text numerate stores (a grid point's key, an error, a
cause): a run's shards holding a longer one are refused (numerate.store.shard_checks)."""
MAX_PROMPT_CHARS = 8_000_000
"""The most characters of a case's prompt (its `input`). The built-in manifolds make at most
about 4,100,000 (Shuffle Tracking's 401 statements, each with an `anchor_prefix` and
`anchor_suffix` as long as a point's key allows: MAX_FIELD_CHARS); a case beyond it is refused
as it is made (numerate.planning.plan), and a run's shards holding one are refused."""
MAX_CASE_DATA_CHARS = 200_000
"""The most characters of a case's own fields as JSON (its `data`: the fields a manifold adds
beside the prompt and target; the built-in manifolds' are a few kilobytes)."""
MAX_INTEGER_DIGITS = 100
"""Digits a whole number may have: more than any count, seed or parameter needs, and few enough
that it converts to a float and prints (Python refuses integers of more than 4,300 digits)."""
MAX_DEPTH = 64
"""Levels of nesting (lists, mappings) a YAML or JSON value may have."""
MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""Size of a configuration file (YAML)."""
MAX_YAML_VALUES = 100_000
"""Values (texts, numbers, lists, mappings) a YAML configuration may hold: a 4 MiB list of
two million took 46 s and 1.45 GB to read before it was refused for what it said."""
MAX_DATA_BYTES = 512 * 1024 * 1024
"""Size of a data file read whole (JSON Lines to grade, a CSV of responses)."""
MAX_LINE_CHARS = 16 * 1024 * 1024
"""Characters of one JSON value (a JSON Lines line)."""
MAX_OPTION_CHARS = 100_000
"""Characters of one value given on the command line (`--set key=value`)."""

Whole = Annotated[int, Strict()]
"""A whole number in a configuration: `true`, `"2"` and `2.0` are refused (pydantic would
take them as 1 and 2), so that a value that is not written as a whole number is an error."""
Real = Annotated[float, Strict()]
"""A number in a configuration: a whole or decimal number, not `true` nor `"0.5"`."""
Flag = Annotated[bool, Strict()]
"""A yes/no in a configuration: `true` or `false`, not `'yes'`, `1` or `"true"`."""
MAX_SEED = 2**63 - 1
"""The largest seed: what a signed 64-bit integer holds (the database's BIGINT, numpy)."""
Seed = Annotated[int, Strict(), Field(ge=0, le=MAX_SEED)]
"""A seed in a configuration: a whole number from 0 to MAX_SEED."""


MAX_PARAMETERS_BYTES = 500_000
"""The most a config may weigh as JSON: it travels as a Prefect flow run's parameters, which
Prefect's server refuses beyond 524,288 bytes (a 422 traceback, after the database was made)."""


def check_parameters_size(as_json: str, what: str) -> None:
    """ValueError (for a pydantic validator) when a config's JSON is beyond
    MAX_PARAMETERS_BYTES."""
    size = len(as_json.encode("utf-8"))
    if size > MAX_PARAMETERS_BYTES:
        raise ValueError(
            f"{what} is {size:,} bytes as JSON; a run's parameters travel through Prefect, which "
            f"takes at most {MAX_PARAMETERS_BYTES:,} here: shorten its longest texts"
        )


class InputLimitError(ConfigError):
    """Input beyond one of the bounds above."""


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """InputLimitError naming `where` when lists and mappings nest more than `limit` levels
    (walked without recursion, so that any depth is safe to check); ConfigError when a text
    in it (a key or a value) holds a lone surrogate (`"\\ud800"`: no character, and no UTF-8
    can encode it, so a database, a request or a file could not take it)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
            continue
        if isinstance(item, dict):
            stack.extend((key, depth) for key in item if isinstance(key, str))
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            raise InputLimitError(f"{where}: nested more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(text[error.start])
        raise ConfigError(
            f"{where}: a text holds \\u{code:04x}, half of a surrogate pair and no character "
            "(write the character itself)"
        ) from None


def valid_text(text: str) -> str:
    """`text` with each lone surrogate (no character: what a JSON `"\\ud800"` decodes to)
    replaced by U+FFFD, a surrogate pair joined into its character: text any UTF-8 consumer
    (the database, a file, a terminal) takes. For text numerate receives, not text it is given
    to check (that is refused: check_depth)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def whole_number(text: str, where: str) -> int:
    """`text` as an int, written as people write one in a data file: ASCII digits, a `-`
    before them at most (ValueError otherwise: int() also takes `+1`, `1_000` and other
    scripts' digits, `٣`); InputLimitError naming `where` when it has more than
    MAX_INTEGER_DIGITS digits."""
    digits = sum(character.isdigit() for character in text)
    if digits > MAX_INTEGER_DIGITS:
        raise InputLimitError(
            f"{where}: a whole number of {digits:,} digits; at most {MAX_INTEGER_DIGITS} allowed"
        )
    if not _WHOLE.fullmatch(text.strip()):  # white space around it, as int() takes
        raise ValueError(f"not a whole number: {text!r}")
    return int(text)


_WHOLE = re.compile(r"-?[0-9]+")


def json_value(text: str, where: str, limit: int = MAX_LINE_CHARS) -> Any:
    """One JSON value, within the bounds (size, depth, digits of whole numbers).

    Raises:
        json.JSONDecodeError: `text` is not JSON.
        InputLimitError: `text` is JSON beyond a bound; the message names `where`.
    """
    if len(text) > limit:
        raise InputLimitError(f"{where}: {len(text):,} characters; at most {limit:,} allowed")
    try:
        value = json.loads(
            text,
            parse_int=functools.partial(whole_number, where=where),
            object_pairs_hook=functools.partial(_unique_keys, where=where),
            parse_constant=functools.partial(_no_constant, where=where),
        )
    except RecursionError:
        raise InputLimitError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    check_depth(value, where)
    return value


def _no_constant(name: str, where: str) -> Any:
    """NaN, Infinity and -Infinity, which Python's json reads though JSON has none of them
    (and would write them back out, making a file no other JSON reader takes): refused."""
    raise ConfigError(f"{where}: {name} is not a JSON value (write a number or null)")


def _unique_keys(pairs: list[tuple[str, Any]], where: str) -> dict[str, Any]:
    """A JSON object's pairs as a dict; ConfigError naming `where` and the key when a key
    appears twice (json.loads would keep the last silently)."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ConfigError(f"{where}: the key {key!r} appears twice; give it once")
        seen.add(key)
    return dict(pairs)


def yaml_value(text: str, where: str) -> Any:
    """A YAML document read with the safe loader, without aliases and within the bounds;
    ConfigError naming `where` (and the line and column, where known) when it is not valid
    YAML or goes beyond a bound."""
    import yaml

    try:
        value = yaml.load(text, Loader=bounded_loader())  # a safe loader, without aliases
    except yaml.reader.ReaderError as error:  # a character YAML does not allow (NUL, ...)
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        character = chr(error.character) if isinstance(error.character, int) else error.character
        raise ConfigError(
            f"{where} (line {line}, column {column}): not valid YAML: the character "
            f"{character!r} is not allowed"
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        context = getattr(error, "context", None)  # the sentence's start: "expected a single
        if context and problem.startswith("but "):  # document in the stream, but found another"
            problem = f"{context}, {problem}"
        raise ConfigError(f"{where}{at}: not valid YAML: {problem}") from None
    except RecursionError:
        raise InputLimitError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, OverflowError) as error:  # a date like 2024-13-45, a number
        raise ConfigError(f"{where}: not valid YAML: {str(error)[:200]}") from None
    check_depth(value, where)
    return value


def _not_json(loader: Any, node: Any) -> Any:
    """The constructor of YAML's tags that make no JSON value (bytes, a set, ordered pairs):
    a ConstructorError at the tag."""
    import yaml

    raise yaml.constructor.ConstructorError(
        None, None, f"the tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not allowed "
        "(a config holds text, numbers, true/false, lists and mappings)", node.start_mark,
    )  # fmt: skip


def _as_written(node: Any, read: Callable[[Any], Any]) -> None:
    """A ConstructorError for a number in one of YAML 1.1's other spellings (hexadecimal,
    octal, binary, `1_000`, base 60), which PyYAML reads (`read`) and JSON, YAML 1.2 and
    `--set` do not: `seed: 1:30` was stored as 90, `per_number: 1:0` made 60 images a number,
    `010` was 8. Decimal digits, a sign, a point and an exponent are numbers as written."""
    import yaml

    text = node.value.lstrip("+-")
    if node.tag.endswith(":float"):
        decimal = "_" not in text and ":" not in text
    else:
        decimal = re.fullmatch(r"0|[1-9][0-9]*", text) is not None
    if decimal:
        return
    meant = str(read(node)) if len(text) <= 40 else ""
    said = f", which YAML 1.1 reads as {meant}" if 0 < len(meant) <= 40 else ""
    raise yaml.constructor.ConstructorError(
        None, None, f"{shorten(node.value, 40)!r} is no number as written{said}: write the "
        "number in decimal digits, or quote it to give text", node.start_mark,
    )  # fmt: skip


def _read_exponents_as_numbers(loader: Any) -> None:
    """`1e-9` is a number in YAML 1.2 and JSON; YAML 1.1 (PyYAML) wants `1.0e-9` and reads
    `1e-9` as text, which a number field then refused as "not a valid number"."""
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )


@functools.cache
def bounded_loader() -> type:
    """YAML's safe loader without aliases (`*name`: a few hundred bytes of nested aliases
    expand to billions of nodes), nesting at most MAX_DEPTH levels and whole numbers of at
    most MAX_INTEGER_DIGITS digits."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        depth = 0
        values = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if self.check_event(yaml.AliasEvent):
                raise yaml.composer.ComposerError(
                    None, None, "YAML aliases (*name) are not allowed", event.start_mark
                )
            if self.depth >= MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark
                )
            self.values += 1
            if self.values > MAX_YAML_VALUES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_YAML_VALUES:,} values", event.start_mark
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_yaml_int(self, node: Any) -> Any:
            _as_written(node, super().construct_yaml_int)
            if len(node.value.lstrip("+-")) > MAX_INTEGER_DIGITS:
                raise yaml.constructor.ConstructorError(
                    None, None,
                    f"a whole number of more than {MAX_INTEGER_DIGITS} digits",
                    node.start_mark,
                )  # fmt: skip
            return int(node.value, 10)

        def construct_yaml_float(self, node: Any) -> Any:
            _as_written(node, super().construct_yaml_float)
            return super().construct_yaml_float(node)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag.endswith(":merge"):  # a key it merges went past "twice"
                    raise yaml.constructor.ConstructorError(
                        None, None, "YAML merge keys (<<) are not allowed; give each key once",
                        key_node.start_mark,
                    )  # fmt: skip
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None,
                        f"the key {key!r} appears twice (the first would be ignored); give it once",
                        key_node.start_mark,
                    )  # fmt: skip
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    BoundedLoader.add_constructor("tag:yaml.org,2002:float", BoundedLoader.construct_yaml_float)
    _read_exponents_as_numbers(BoundedLoader)

    for tag in ("binary", "set", "omap", "pairs"):
        BoundedLoader.add_constructor(f"tag:yaml.org,2002:{tag}", _not_json)
    return BoundedLoader
