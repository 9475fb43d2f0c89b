"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from numerate.kernel.errors import ConfigError


def read_text(path: Path, what: str = "") -> str:
    """A UTF-8 text file's content; ConfigError naming `what` and the path when it cannot be
    read or is not UTF-8."""
    name = f"{what} {path}".strip()
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{name} is not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"cannot read {name}: {error.strerror}") from None


def write_atomically(path: Path, content: str | bytes | Callable[[Path], None]) -> Path:
    """Write `path` under a temporary name beside it, then rename: a reader (or a run killed
    half-way) sees the old file or the whole new one, never a part.

    Args:
        path: the file to write; its folder is created.
        content: text (UTF-8), bytes, or a function that writes the temporary path it is given.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    if isinstance(content, str):
        partial.write_text(content, encoding="utf-8")
    elif isinstance(content, bytes):
        partial.write_bytes(content)
    else:
        content(partial)
    partial.replace(path)
    return path
