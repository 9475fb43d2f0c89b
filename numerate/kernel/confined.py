"""Files in a folder that nothing in it can lead out of.

What numerate serves from, copies into, writes in or removes from a folder it does not own
alone (a NumGen run's images, an export's folder) is named relative to that folder and reached
one name at a time, each opened relative to the one above it without following a symbolic
link (O_NOFOLLOW): a link planted anywhere below the folder (an image replaced by a link to
/etc/passwd, an exported page or run folder replaced by a link to a file or folder elsewhere)
is refused, never followed, so no file outside the folder is read, written or removed. The
folder itself may be reached through links (a home under /home -> /data/home): it is the
user's to name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from numerate.kernel.errors import NumerateError

__all__ = ["Confined", "LeadsOutside", "confined_path", "write_below"]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_FILE = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0)


class LeadsOutside(NumerateError):
    """A name below a confined folder that is a symbolic link, or not what it must be (a file
    where a folder must be), or a name that leaves the folder (`..`, absolute)."""

    def __init__(self, folder: Path, relative: str, what: str) -> None:
        why = f"; numerate follows no link out of {folder}" if what == LINK else ""
        super().__init__(f"{folder / relative}: {what}{why}")
        self.relative = relative
        self.kind = what
        """What it is, in a word (`a symbolic link`, `not a folder`)."""
        self.what = f"{what}{why}"
        """What it is, without its path (`a symbolic link; numerate follows no link ...`)."""


LINK = "a symbolic link"


class Confined:
    """The files under `folder`, reached without following a link (module docstring)."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)

    def parts(self, relative: str | PurePosixPath) -> tuple[str, ...]:
        """`relative`'s names; LeadsOutside for a name that is none (empty, absolute, `.`,
        `..`, a NUL)."""
        text = str(relative)
        parts = tuple(PurePosixPath(text).parts)
        if (
            not parts
            or text.startswith("/")
            or "\x00" in text
            or any(part in (".", "..") for part in parts)
        ):
            raise LeadsOutside(self.folder, text, "not a name inside the folder")
        return parts

    def relative(self, path: Path | str) -> str | None:
        """`path` (absolute, as recorded) relative to the folder, or None when it does not lie
        under it (compared by name: no link is looked at here)."""
        try:
            inside = Path(os.path.normpath(path)).relative_to(os.path.normpath(self.folder))
        except ValueError:
            return None
        return inside.as_posix() if inside.parts else None

    @contextlib.contextmanager
    def _folder_of(self, parts: tuple[str, ...], make: bool = False) -> Iterator[int]:
        """A descriptor of the folder holding the last of `parts`, each folder on the way
        opened without following a link (made when missing, with `make`)."""
        descriptor = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for depth, name in enumerate(parts[:-1]):
                try:
                    below = os.open(name, _DIRECTORY, dir_fd=descriptor)
                except FileNotFoundError:
                    if not make:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=descriptor)
                    below = self._open_folder(descriptor, parts[: depth + 1])
                except OSError as error:
                    raise self._refused(parts[: depth + 1], error) from None
                os.close(descriptor)
                descriptor = below
            yield descriptor
        finally:
            os.close(descriptor)

    def check_folder(self, relative: str) -> None:
        """LeadsOutside when a name on the way to folder `relative`, or that folder, is a
        symbolic link or not a folder; one not made yet is none of them."""
        inside = (*self.parts(relative), "")  # a name below it: the folder itself is walked
        with contextlib.suppress(FileNotFoundError), self._folder_of(inside):
            pass

    def _open_folder(self, at: int, parts: tuple[str, ...]) -> int:
        try:
            return os.open(parts[-1], _DIRECTORY, dir_fd=at)
        except OSError as error:
            raise self._refused(parts, error) from None

    def _refused(self, parts: tuple[str, ...], error: OSError) -> LeadsOutside | OSError:
        """Why a name could not be opened: a link or not a folder is LeadsOutside; anything
        else (no permission, gone) is the OSError it was."""
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            kind = LINK if self._is_link(parts) else "not a folder"
            return LeadsOutside(self.folder, "/".join(parts), kind)
        return error

    def _is_link(self, parts: tuple[str, ...]) -> bool:
        try:
            return stat.S_ISLNK(os.lstat(self.folder.joinpath(*parts)).st_mode)
        except OSError:
            return False

    def open(self, relative: str) -> BinaryIO:
        """A regular file under the folder, open for reading; LeadsOutside when it or a
        folder on its way is a link or not what it must be (a pipe, a device); FileNotFoundError
        when it is not there."""
        parts = self.parts(relative)
        with self._folder_of(parts) as folder:
            try:
                descriptor = os.open(parts[-1], _FILE, dir_fd=folder)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise LeadsOutside(self.folder, relative, LINK) from None
                raise
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise LeadsOutside(self.folder, relative, "not a regular file")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")

    def read_bytes(self, relative: str, limit: int, head: bool = False) -> bytes:
        """The content of a regular file under the folder, at most `limit` bytes (ValueError
        beyond; with `head`, its first `limit` bytes); LeadsOutside when it or a folder on
        its way is a link or not what it must be; FileNotFoundError when it is not there."""
        with self.open(relative) as handle:
            data = handle.read(limit + 1)
        if head:
            return data[:limit]
        if len(data) > limit:
            raise ValueError(f"{self.folder / relative}: larger than {limit:,} bytes")
        return data

    def write(self, relative: str, content: bytes | Callable[[BinaryIO], object]) -> None:
        """Write a file under the folder (its folders made): `content`, or what it writes to
        the file it is given (a large file is streamed, never held), under a new name beside
        it, then renamed over it, so that a reader sees the old file or the whole new one and
        a link at its name is replaced, never written through. LeadsOutside when a folder on
        its way is a link or a file."""
        parts = self.parts(relative)
        with self._folder_of(parts, make=True) as folder:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
            temporary = f".{parts[-1][:100]}.{secrets.token_hex(8)}.partial"
            descriptor = os.open(temporary, flags, 0o666, dir_fd=folder)
            try:
                with os.fdopen(descriptor, "wb") as handle:
                    if callable(content):
                        content(handle)
                    else:
                        handle.write(content)
                    handle.flush()
                    os.fsync(handle.fileno())
                if self._is_a_folder(parts[-1], folder):
                    raise LeadsOutside(self.folder, relative, "a folder, where a file goes")
                os.replace(temporary, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise

    @staticmethod
    def _is_a_folder(name: str, folder: int) -> bool:
        try:
            return stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return False

    def is_file(self, relative: str) -> bool:
        """Whether a regular file (not a link) lies at `relative`, reached through no link."""
        return self.file_problem(relative) is None

    def file_problem(self, relative: str) -> str | None:
        """Why no regular file reached through no link lies at `relative`, in words that name
        nothing outside the folder ("not there", "images: a symbolic link", "not a regular
        file", the system's reason); None when one does."""
        try:
            parts = self.parts(relative)
            with self._folder_of(parts) as folder:
                found = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except LeadsOutside as refused:
            return f"{refused.relative}: {refused.kind}"
        except FileNotFoundError:
            return "not there"
        except OSError as error:
            return error.strerror or type(error).__name__
        if stat.S_ISLNK(found.st_mode):
            return f"{relative}: {LINK}"
        return None if stat.S_ISREG(found.st_mode) else "not a regular file"

    def remove(self, relative: str) -> None:
        """Remove a file (or a link: the link itself) under the folder, then the folders it
        leaves empty up to the folder; nothing when it is gone. LeadsOutside when a folder on
        its way is a link: nothing is removed through it."""
        parts = self.parts(relative)
        with contextlib.suppress(FileNotFoundError), self._folder_of(parts) as folder:
            found = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
            if stat.S_ISDIR(found.st_mode):
                raise LeadsOutside(self.folder, relative, "a folder, where a file was")
            os.unlink(parts[-1], dir_fd=folder)
        for depth in range(len(parts) - 1, 0, -1):  # the folders it emptied, deepest first
            try:
                with self._folder_of(parts[:depth]) as holder:
                    os.rmdir(parts[depth - 1], dir_fd=holder)
            except (OSError, LeadsOutside):  # not empty (nor those above it), or not a folder
                return


def confined_path(path: Path | str, levels: int) -> tuple[Confined, str]:
    """`path` as the folder `levels` names above its end and its name below it: what numerate
    makes below a folder the user named (`<images_dir>/images/<generator>/<file>`: 3 levels)
    is reached, made and written through no link (a link planted at `images` or at the
    generator's folder is refused, never written through), while the user's folder itself
    may be reached through links."""
    parts = Path(path).parts
    return Confined(Path(*parts[:-levels])), "/".join(parts[-levels:])


def write_below(
    path: Path | str, levels: int, content: bytes | Callable[[BinaryIO], object]
) -> Path:
    """Write `path` (`content`, or what it writes to a file) through no link in the `levels`
    names at its end (`confined_path`), its folders made (the one above them as well, as it
    is named); returns `path`."""
    folder, name = confined_path(path, levels)
    folder.folder.mkdir(parents=True, exist_ok=True)  # the user's: reached through links too
    folder.write(name, content)
    return Path(path)
