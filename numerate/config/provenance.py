"""What produced a number: the code version of a run and the generator version of a case.

Both are read from the source files (and git, when running from a checkout), once per process.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
from pathlib import Path

from numerate import __version__
from numerate.manifolds import registry

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
    """A git command's output in the checkout numerate runs from, or None outside one."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


@functools.cache
def code_version() -> str:
    """numerate's version, with the git commit when running from a checkout, and `.dirty`
    when tracked files have uncommitted changes (`0.1.0+1b331a0.dirty`)."""
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return __version__
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return f"{__version__}+{commit}{'.dirty' if dirty else ''}"


def generator_sources(manifold: str) -> list[Path]:
    """The files that decide a manifold's cases: its module (code and word lists) and the
    helpers every generator shares."""
    spec = registry.get(manifold)
    module = sys.modules[spec.generate.__module__]
    common = Path(registry.__file__).with_name("common.py")
    return sorted({Path(str(module.__file__)).resolve(), common.resolve()})


@functools.cache
def generator_version(manifold: str) -> str:
    """Hash of a manifold's generator sources: part of every case id, so a changed generator
    never shares ids (or stored text and targets) with the old one."""
    digest = hashlib.sha256()
    for path in generator_sources(manifold):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def generator_label(manifold: str) -> str:
    """The generator version as stored with each case: the hash, and `+dirty` when its
    sources differ from the checkout's last commit (the hash still tells versions apart)."""
    version = generator_version(manifold)
    files = [str(p.relative_to(ROOT)) for p in generator_sources(manifold) if ROOT in p.parents]
    if files and _git("status", "--porcelain", "--untracked-files=no", "--", *files):
        return f"{version}+dirty"
    return version
