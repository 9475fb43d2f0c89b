"""The folder an export of the viewer's pages goes into (`numerate view --export`): new,
empty, or an earlier export, which it updates. Every file of it is read, written and removed
without following a link planted in it (numerate.kernel.confined), and an export that does not
end leaves what was there before."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from numerate.kernel.confined import LINK, Confined, LeadsOutside
from numerate.kernel.errors import ConfigError
from numerate.kernel.files import check_folder

MARKER = ".numerate-export"
"""The file an export leaves in its folder: the files it wrote, one per line. A later export
into the same folder removes those it no longer writes (a run since deleted), nothing else."""

MARKER_BYTES = 64 * 1024 * 1024
"""The largest marker an export reads (its list of a million pages is some 60 MB)."""


class ExportFolder:
    """An export's folder, made if needed (`make`), with what an earlier export there wrote."""

    def __init__(self, path: Path, made: list[Path]) -> None:
        self.path = path
        self.inside = Confined(path)
        self.made = made
        """The folder and the folders above it this export made, deepest first."""
        self.before = self._earlier_export()
        """The files an earlier export into it wrote (its marker's list)."""
        self.fresh = not self.before and [p.name for p in path.iterdir()] == [MARKER]
        """Whether it held nothing but its marker when the export began: all in it is ours."""

    @classmethod
    def make(cls, given: str) -> ExportFolder:
        """The folder `given`, made if needed: new, or empty, or an earlier export (its
        MARKER, or the index.html of one made before there was one); ConfigError when it is
        something else or cannot be written. A folder it made for nothing is removed again."""
        if not given.strip():
            raise ConfigError("--export '': give a folder")
        check_folder("--export", given)  # a file, under a file, a name too long, not writable
        path = Path(given).expanduser()
        inside = Confined(path)
        earlier = inside.is_file(MARKER) or _an_old_export(_head(inside, "index.html", 4096))
        if path.is_dir() and any(path.iterdir()) and not earlier:
            raise ConfigError(f"--export {given}: a folder with other files in it (give a new one)")
        linked = _linked_folder(path) if earlier else None
        if linked is not None:  # before a page is written: refused half way, it left half an export
            raise LeadsOutside(path, linked, LINK)
        made = [folder for folder in (path, *path.parents) if not folder.exists()]
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not inside.is_file(MARKER):  # a link there is replaced, never written through
                inside.write(MARKER, b"")
            return cls(path, made)
        except OSError as error:
            _remove_empty(made)
            raise ConfigError(f"--export {given}: cannot write there ({error.strerror})") from None
        except BaseException:
            _remove_empty(made)
            raise

    def _earlier_export(self) -> set[str]:
        """The files an earlier export wrote, as its MARKER lists them: only names of regular
        files inside the folder, reached through no link, and those under a folder that is
        now a link (`finish` says they are not removed); a damaged or edited marker, with
        bytes that are no UTF-8, a NUL, `..`, a folder's name, a link, is no reason to stop,
        nor to remove anything else; a marker that is itself a link lists nothing."""
        names = _head(self.inside, MARKER, MARKER_BYTES).splitlines()
        return {name for name in names if "\ufffd" not in name and self._listed(name)}

    def _listed(self, name: str) -> bool:
        try:
            parts = self.inside.parts(name)
        except LeadsOutside:  # no name inside the folder (`..`, absolute)
            return False
        try:
            if len(parts) > 1:
                self.inside.check_folder("/".join(parts[:-1]))
        except LeadsOutside as refused:  # a link on its way: kept, and said as it stays
            return refused.what.startswith(LINK)
        return self.inside.is_file(name)

    def finish(self, written: Iterable[str], warn: Callable[[str], object]) -> None:
        """The export ended, having written `written`: the files the earlier one wrote that
        this one did not (a run since deleted) are removed, never through a link planted in
        the folder (one that leads out is said, `warn`), and the marker lists the new ones."""
        names = list(written)
        for name in sorted(self.before - set(names)):
            try:
                self.inside.remove(name)
            except LeadsOutside as refused:
                warn(f"not removed: {refused}")
        self._write_marker(names)

    def _write_marker(self, names: Iterable[str]) -> None:
        """The MARKER: the files written, one per line (a link at its name replaced)."""
        self.inside.write(MARKER, "".join(f"{name}\n" for name in names).encode())

    def keep_what_was(self, written: Iterable[str]) -> None:
        """After an export that did not end: what a new one wrote is removed (half a site
        whose links lead nowhere was left behind, or an empty marker in a new folder); an
        earlier one keeps the pages it had and those written now, listed in its marker (the
        next export removes those it no longer writes)."""
        if self.fresh:  # all in it is this export's
            for inside in list(self.path.iterdir()):
                with contextlib.suppress(OSError):  # rmtree removes a link, never its target
                    if inside.is_dir() and not inside.is_symlink():
                        shutil.rmtree(inside)
                    else:
                        inside.unlink()
            _remove_empty(self.made)  # a folder the user had is left as it was: empty
            return
        with contextlib.suppress(OSError, LeadsOutside):
            self._write_marker(sorted(self.before | set(written)))

    def unmade(self) -> None:
        """Remove the folders this export made, when they hold nothing but its marker (a stop
        in an export's first second left one behind, an empty marker in it)."""
        _remove_empty(self.made)


def _remove_empty(made: list[Path]) -> None:
    """Remove the folders of `made` (deepest first) that hold nothing but an export's marker."""
    for folder in made:  # deepest first: each above is empty once those below are gone
        with contextlib.suppress(OSError):
            if [inside.name for inside in folder.iterdir()] in ([MARKER], []):
                (folder / MARKER).unlink(missing_ok=True)
                folder.rmdir()


def _an_old_export(index: str) -> bool:
    """Whether `index` (the beginning of an index.html) is the runs page of an export made
    before exports left their MARKER: its title, as the viewer writes it (a page of the user's
    that merely mentions "numerate view" was taken for one, and written over)."""
    return "<title>Runs · numerate view</title>" in index


def _head(inside: Confined, name: str, limit: int) -> str:
    """The start of a file of the folder, at most `limit` bytes, read through no link ("" when
    it cannot be read)."""
    try:
        return inside.read_bytes(name, limit, head=True).decode("utf-8", errors="replace")
    except (OSError, ValueError, LeadsOutside):
        return ""


def _linked_folder(path: Path) -> str | None:
    """The first name under `path` (walked without following a link) that is a symbolic link
    to a folder: an export writes pages into its folders and follows no link out."""
    for root, folders, _ in os.walk(path, followlinks=False):
        for name in folders:  # a link to a folder is listed here, and not walked into
            if (Path(root) / name).is_symlink():
                return str((Path(root) / name).relative_to(path))
    return None
