"""Which Prefect server a command's flows report to, and its lifecycle.

Without PREFECT_API_URL, the first command that runs a flow starts Prefect's own server in
the background (numerate.server.serverd: what `prefect server start` serves) under Prefect's
home ($PREFECT_HOME, default ~/.prefect), says so in one line with the UI's address, and every
later command reuses it: a run no longer pays a server's start (3 s, 7 s on a new home) and
its stop. It stops by itself once no command has used it for NUMERATE_SERVER_IDLE_MINUTES
(default 60; 0 keeps it until `numerate server stop`). NUMERATE_SERVER=temporary gives each
command a server of its own, started and stopped with it.

Its files are in $PREFECT_HOME/numerate-server/: server.json (who keeps it, its URL),
server.log, users.lock (held shared by every command using it, so that it never stops under
one), last-used (touched when a command starts and ends); a temporary server's in
temporary/<the command's pid>/.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import io
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol
from urllib.parse import urlsplit, urlunsplit

from numerate.kernel import stopping
from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, ConfigError, NumerateError, shorten
from numerate.kernel.files import check_folder
from numerate.kernel.http import Unanswered, answer, shown_url, url_problem

DEFAULT_PORT = 4200
DEFAULT_IDLE_MINUTES = 60.0
START_TIMEOUT_SECONDS = 90.0
LOCK_TIMEOUT_SECONDS = 30.0


class ServerError(NumerateError):
    """The background server could not be started, reached or stopped (exit 3: the machine's
    fault, not the input's; running the command again may work)."""

    exit_code = EXIT_FAILED_FOR_NOW


def nothing() -> None:
    return None


class Server(Protocol):
    def wait(self, meanwhile: Callable[[], object] = nothing) -> None:
        """Until the server answers. `meanwhile`: work for the time it is still starting
        (not done when it already answers)."""

    def abandon(self) -> None:
        """The command ends before running a flow: a server it started for nothing stops."""


class External:
    """A server this command did not start: PREFECT_API_URL, or a `prefect server start`
    already answering on Prefect's port."""

    def wait(self, meanwhile: Callable[[], object] = nothing) -> None:
        return None

    def abandon(self) -> None:
        return None


ANSWER_TIMEOUT_S = 5.0
"""How long a command waits for the Prefect API at PREFECT_API_URL to answer at all."""


def health_url(url: str) -> str:
    """The health check of Prefect's API at `url`: `/health` after its path, before a query
    it may hold (`/api?token=X` asked `/api?token=X/health`)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/health"))


def valid_api_url(url: str) -> None:
    """ConfigError unless PREFECT_API_URL `url` is a URL at all: Prefect's import reads it, and
    printed pydantic's words of one that is not ("Failed to initialize plugins: ...")."""
    problem = url_problem(url)
    if problem:
        raise ConfigError(f"PREFECT_API_URL {shown_url(url)} is not a valid URL: {problem}")


def api_answers(url: str) -> None:
    """ConfigError unless Prefect's health check at PREFECT_API_URL `url` answers, whole,
    within ANSWER_TIMEOUT_S (a 401 or 403 counts: a server that wants a key); Prefect's own
    client would wait 60 s a try, then end in a traceback."""
    valid_api_url(url)  # one that is none was probed, said to answer nothing in 5 s
    health = health_url(url)
    try:
        status, said = answer(health, ANSWER_TIMEOUT_S, limit=1024)
    except Unanswered as error:
        raise ConfigError(
            f"PREFECT_API_URL {url}: Prefect's API cannot be reached ({error.reason}); start a "
            "server (prefect server start) or fix the URL"
        ) from None
    if 300 <= status < 400:  # not followed: Prefect's client would not follow it either
        raise ConfigError(
            f"PREFECT_API_URL {url}: {health} answers with a redirect (HTTP {status}); give "
            "the address it points to"
        )
    if status >= 400 and status not in (401, 403):  # 401, 403: it wants a key Prefect has
        raise ConfigError(f"PREFECT_API_URL {url}: not a Prefect API (HTTP {status} at {health})")
    if status < 300 and said.strip() != b"true":  # Prefect's health answers `true`; a web
        raise ConfigError(  # page answered 200 too, and Prefect's client failed in a traceback
            f"PREFECT_API_URL {url}: not a Prefect API ({health} answers "
            f"{shorten(said.decode(errors='replace').strip(), 40)!r}, not Prefect's true)"
        )


def check_prefect_settings() -> None:
    """ConfigError naming the PREFECT_* variable whose value Prefect's settings refuse
    (PREFECT_LOGGING_LEVEL=LOUD ended the command in pydantic's traceback at Prefect's
    import), and the files Prefect reads as it is imported when they are no small files
    (PREFECT_HOME is checked before it: `connect`)."""
    from pydantic import ValidationError

    for variable in PREFECT_FILES:  # read whole at Prefect's import: a pipe waited for ever,
        _small_file(variable)  # /dev/zero filled the memory, a folder was "Errno 21", exit 3
    try:  # Prefect prints the error itself ("Failed to initialize plugins"): said once, below
        with contextlib.redirect_stderr(io.StringIO()):
            import prefect.context  # noqa: F401 (its import loads the profiles: the environment)
            from prefect.settings import get_current_settings

            settings = get_current_settings()
    except ValidationError as error:
        problem = error.errors()[0]
        section = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", error.title.removesuffix("Settings"))
        name = "_".join(part for part in ("PREFECT", section.upper(),
                                          *map(str, problem["loc"])) if part).upper()  # fmt: skip
        raise ConfigError(
            f"{name}={problem.get('input')!r}: {problem['msg']} (a Prefect setting)"
        ) from None
    timeout = settings.api.request_timeout
    if not 0 < timeout <= MAX_REQUEST_TIMEOUT_S:  # NaN too: Prefect took nan, 0, -1, 1e308,
        raise ConfigError(  # then its client's traceback, 5 to 77 s later
            f"PREFECT_API_REQUEST_TIMEOUT={timeout!r}: give the seconds a request to Prefect's "
            f"server may take, above 0 and at most {MAX_REQUEST_TIMEOUT_S:g} (a Prefect setting)"
        )
    database = settings.server.database.connection_url  # a SecretStr: it may hold a password
    if database is not None:  # a malformed one: "did not start", exit 3, naming a port to change
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(database.get_secret_value())
        except ArgumentError:
            raise ConfigError(
                "PREFECT_SERVER_DATABASE_CONNECTION_URL: no database URL; unset it for "
                "Prefect's own SQLite file, or give one such as "
                "postgresql+asyncpg://user@host:5432/prefect (a Prefect setting)"
            ) from None


PREFECT_FILES = ("PREFECT_LOGGING_CONFIG_PATH", "PREFECT_PROFILES_PATH")
"""The files Prefect reads whole as it is imported, named by these variables."""

MAX_PREFECT_FILE_BYTES = 1 << 20
MAX_REQUEST_TIMEOUT_S = 86_400.0


def _small_file(variable: str) -> None:
    """ConfigError unless the file $`variable` names (when set and there) is a regular file
    of at most MAX_PREFECT_FILE_BYTES."""
    given = os.environ.get(variable, "")
    if not given.strip():
        return
    try:
        found = os.stat(given)
    except OSError:
        return  # none there: Prefect's own default, or its own error
    if not stat.S_ISREG(found.st_mode):
        what = "a folder" if stat.S_ISDIR(found.st_mode) else "a device, a pipe or a socket"
        raise ConfigError(f"{variable} {given!r:.200}: {what}, not a file (a Prefect setting)")
    if found.st_size > MAX_PREFECT_FILE_BYTES:
        raise ConfigError(
            f"{variable} {given!r:.200}: {found.st_size:,} bytes, more than the "
            f"{MAX_PREFECT_FILE_BYTES:,} such a file may hold (a Prefect setting)"
        )


def check_prefect_home() -> None:
    """ConfigError unless $PREFECT_HOME (when set) can be a folder Prefect writes in: a file
    or device there left Prefect's temporary server to time out after 25 s. Set but blank,
    or unset with a blank $HOME (Prefect's folder is then /.prefect), it is refused too,
    before anything is made there."""
    if "PREFECT_HOME" not in os.environ:
        if "HOME" in os.environ and not os.environ["HOME"].strip():
            raise ConfigError(
                f"HOME={os.environ['HOME']!r}: Prefect keeps its files in $HOME/.prefect, "
                "which would be /.prefect; set HOME, or PREFECT_HOME to a folder"
            )
        return
    given = os.environ["PREFECT_HOME"]
    if not given.strip():
        raise ConfigError(
            f"PREFECT_HOME={given!r}: an empty path would mean here; unset it or give a folder"
        )
    check_folder("PREFECT_HOME", given)


def mode() -> str:
    """'external' (PREFECT_API_URL is set), 'temporary' (NUMERATE_SERVER=temporary) or
    'background' (the default)."""
    if os.environ.get("PREFECT_API_URL"):
        return "external"
    chosen = os.environ.get("NUMERATE_SERVER", "background").strip().lower() or "background"
    if chosen not in ("background", "temporary"):
        raise ConfigError(
            f"NUMERATE_SERVER={os.environ['NUMERATE_SERVER']!r}: choose background or temporary"
        )
    return chosen


def idle_minutes() -> float:
    raw = os.environ.get("NUMERATE_SERVER_IDLE_MINUTES", "").strip()
    if not raw:
        return DEFAULT_IDLE_MINUTES
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e6:
        raise ConfigError(
            f"NUMERATE_SERVER_IDLE_MINUTES={raw!r}: give minutes from 0 to 999,999 (0: never "
            "stop by itself)"
        )
    return value


def home() -> Path:
    """$PREFECT_HOME/numerate-server (read without importing Prefect: commands start fast)."""
    prefect_home = os.environ.get("PREFECT_HOME") or "~/.prefect"
    return Path(prefect_home).expanduser() / "numerate-server"


@dataclass(frozen=True)
class State:
    pid: int  # the server (numerate.server.serverd)
    url: str  # the API, http://127.0.0.1:PORT/api
    started: float
    idle_minutes: float

    @property
    def ui(self) -> str:
        return self.url.removesuffix("/api")


def read_state(folder: Path) -> State | None:
    """The running server's state, or None when there is none (or its process is gone)."""
    try:
        state = State(**json.loads((folder / "server.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return state if alive(state.pid) else None


_servers: dict[int, subprocess.Popen[bytes]] = {}  # the servers this process started


def alive(pid: int) -> bool:
    if pid in _servers:  # our child: poll() also reaps it (a dead child is no zombie then)
        return _servers[pid].poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: it exists
    return True


def healthy(url: str, timeout: float = 0.3) -> bool:
    """Whether a Prefect server at `url` says it is healthy, within `timeout` seconds."""
    try:
        status, body = answer(health_url(url), timeout, limit=1024)
    except Unanswered:
        return False
    return status == 200 and body.strip() == b"true"


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_url() -> str:
    """The API address of a Prefect server on the port numerate's would use: a server the user
    runs there is used instead of starting one."""
    port = choose_port() if os.environ.get("PREFECT_SERVER_API_PORT", "").strip() else None
    return f"http://127.0.0.1:{port or DEFAULT_PORT}/api"


def choose_port() -> int:
    """$PREFECT_SERVER_API_PORT when set; else Prefect's 4200 when free, else any free port."""
    raw = os.environ.get("PREFECT_SERVER_API_PORT", "").strip()
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise ConfigError(f"PREFECT_SERVER_API_PORT={raw!r}: give a port, 1 to 65535")
        return int(raw)
    return DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port()


def free_port() -> int:
    """A port of 127.0.0.1 that no program holds now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def locked(path: Path, how: int, timeout: float = LOCK_TIMEOUT_SECONDS) -> IO[str]:
    """`path` opened and flock'ed (`how`), waiting at most `timeout` seconds."""
    handle = path.open("a")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, how | fcntl.LOCK_NB)
            return handle
        except OSError:
            if time.monotonic() > deadline:
                handle.close()
                raise ServerError(f"{path} stayed locked for {timeout:.0f} s") from None
            time.sleep(0.05)


def touch(folder: Path) -> None:
    with contextlib.suppress(OSError):
        (folder / "last-used").touch()


_holding: list[IO[str]] = []  # this process's shared hold on the server (kept until exit)


class Background:
    """Numerate's background server: reused when running, else started now (its start goes on
    while the command checks its input and endpoints); `wait()` before the first flow."""

    def __init__(self) -> None:

        self.folder = home()
        self.started_here = self.announced = self.adopted = False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not _holding:
                _holding.append(locked(self.folder / "users.lock", fcntl.LOCK_SH))
                stopping.at_exit(functools.partial(touch, self.folder))
            touch(self.folder)
            with locked(self.folder / "start.lock", fcntl.LOCK_EX):
                self.state, self.url = self._find_or_start()
        except OSError as error:
            raise ServerError(
                f"cannot keep Prefect's server under {self.folder}: {error.strerror or error} "
                "(set PREFECT_HOME to a folder you can write, or NUMERATE_SERVER=temporary)"
            ) from None
        os.environ["PREFECT_API_URL"] = self.url

    def _find_or_start(self) -> tuple[State | None, str]:
        state = read_state(self.folder)
        if state is not None:
            return state, state.url
        theirs = port_url()
        if healthy(theirs):  # a `prefect server start` of the user's: report to it
            self.adopted = True
            return None, theirs
        self.started_here = True
        state = launch(self.folder, choose_port(), idle_minutes())
        return state, state.url

    def announce(self) -> None:
        """Say, once, that this command started the server (said when the command gets to
        use it: a command that stops before, on bad input, says only why it stopped)."""
        if self.adopted and not self.announced:  # said: the runs go to someone's server
            self.announced = True
            print(
                f"note: reporting to the Prefect server already on {self.url}, which numerate "
                f"did not start under PREFECT_HOME={self.folder.parent} (NUMERATE_SERVER="
                "temporary keeps this command's runs to itself)",
                file=sys.stderr,
            )
        if not self.started_here or self.state is None or self.announced:
            return
        self.announced = True
        where = f"UI at {self.state.ui}" if ui_enabled() else f"API at {self.state.url}"
        after = (
            f"stops after {self.state.idle_minutes:g} idle minutes"
            if self.state.idle_minutes
            else "runs until `numerate server stop`"
        )
        print(
            f"starting Prefect's server in the background: {where} (reused by later "
            f"commands; {after}; `numerate server stop` stops it)",
            file=sys.stderr,
        )

    def abandon(self) -> None:
        """Stop the server this command started, unless another command uses it already."""
        if not self.started_here or self.state is None or self.announced:
            return
        for hold in _holding:
            hold.close()  # our own shared hold: then the exclusive lock means nobody else
        _holding.clear()
        with (
            contextlib.suppress(ServerError),
            locked(self.folder / "users.lock", fcntl.LOCK_EX, timeout=0),
        ):
            terminate(self.state)
            with contextlib.suppress(OSError):
                (self.folder / "server.json").unlink()

    def wait(self, meanwhile: Callable[[], object] = nothing) -> None:
        """Until the server answers, doing `meanwhile` first when it does not yet; a server
        that cannot start is a ServerError naming its log."""
        self.announce()
        if self.state is not None:
            wait_until_healthy(self.folder, self.state, meanwhile)


def wait_until_healthy(
    folder: Path, state: State, meanwhile: Callable[[], object], owned: bool = False
) -> None:
    """Until the server of `state` answers, doing `meanwhile` first when it does not yet; a
    server that cannot start (its process ended, or START_TIMEOUT_SECONDS passed) is a
    ServerError naming its log."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    if not healthy(state.url, timeout=1.0):
        meanwhile()
    while not healthy(state.url, timeout=1.0):
        if not alive(state.pid) or time.monotonic() > deadline:
            raise ServerError(not_started(folder, state, owned))
        time.sleep(0.05)


class Temporary:
    """NUMERATE_SERVER=temporary: a server of this command's own (numerate.server.serverd, on
    any free port, over the Prefect database of $PREFECT_HOME), stopped as the command ends,
    before it exits (no second server on that database meanwhile), and by itself when its
    parent, this process, is gone however it ended (SIGKILL included). `wait()` before the
    first flow."""

    def __init__(self) -> None:
        self.folder = home() / "temporary" / str(os.getpid())
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            forget_temporary_servers_gone(self.folder.parent)
            self.state = launch(self.folder, port=free_port(), idle=0.0, owned=True)
        except OSError as error:
            raise ServerError(
                f"cannot start Prefect's server under {self.folder}: {error.strerror or error} "
                "(set PREFECT_HOME to a folder you can write)"
            ) from None
        os.environ["PREFECT_API_URL"] = self.state.url
        stopping.at_exit(self.stop)

    def wait(self, meanwhile: Callable[[], object] = nothing) -> None:
        if healthy(self.state.url, timeout=0.2):
            return
        print(
            "starting Prefect's temporary server (about 8 s; NUMERATE_SERVER=background keeps "
            "one running for later commands)",
            file=sys.stderr,
        )
        wait_until_healthy(self.folder, self.state, meanwhile, owned=True)

    def abandon(self) -> None:
        return None  # it stops with this process

    def stop(self) -> None:
        """Stop the server, gracefully within TEMPORARY_STOP_S, and remove its folder (kept
        when the server had ended by itself: its log says why)."""
        if not alive(self.state.pid):
            return
        terminate(self.state, grace=TEMPORARY_STOP_S)
        shutil.rmtree(self.folder, ignore_errors=True)


TEMPORARY_STOP_S = 3.0
"""How long a command waits at its end for its temporary server's graceful stop."""


def forget_temporary_servers_gone(folder: Path) -> None:
    """Remove the folders of temporary servers whose process is gone (each removes its own
    as it stops; one killed leaves it)."""
    for each in folder.iterdir():
        if each.name.isdigit() and not alive(int(each.name)):
            shutil.rmtree(each, ignore_errors=True)


def ui_enabled() -> bool:
    return os.environ.get("PREFECT_SERVER_UI_ENABLED", "true").strip().lower() not in (
        "false", "0", "no", "off",
    )  # fmt: skip


def not_started(folder: Path, state: State, owned: bool = False) -> str:
    """Why the server did not start: its log's last line, and, for the background server
    (not `owned` by a command), what to change."""
    log = folder / "server.log"
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    last = f": {lines[-1].strip()[:300]}" if lines else ""
    hint = (
        ""
        if owned
        else (" (choose another port with PREFECT_SERVER_API_PORT, or NUMERATE_SERVER=temporary)")
    )
    return f"Prefect's server at {state.ui} did not start (its log: {log}){last}{hint}"


# numerate.server.serverd run as a script: not through `-m`, which imports numerate.cli and
# every command first (0.05 s more before the server answers)
RUN_SERVERD = (
    "import runpy, sys; sys.argv[0] = {path!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
).format(path=str(Path(__file__).with_name("serverd.py")))


def launch(folder: Path, port: int, idle: float, owned: bool = False) -> State:
    """Start the server (numerate.server.serverd) in its own session, keeping its files in
    `folder` (under home()), over the Prefect database of $PREFECT_HOME; record it in
    server.json. `owned`: it stops when this process is gone (a temporary server)."""
    if not owned and not port_is_free(port):  # PREFECT_SERVER_API_PORT's, held by another
        raise ConfigError(  # program; a temporary server's port, taken since free_port()
            # chose it, ends its start: said by not_started
            f"PREFECT_SERVER_API_PORT={port}: the port is taken by another program, not a Prefect "
            "server (choose a free port, or unset it for 4200 or any free port)"
        )
    env = dict(os.environ, PREFECT_HOME=str(home().parent.resolve()))
    env.pop("PREFECT_API_URL", None)
    owner = [str(os.getpid())] if owned else []
    with (folder / "server.log").open("ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-c", RUN_SERVERD, str(folder.resolve()), str(port), str(idle * 60),
             *owner],
            env=env, cwd=folder, start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    _servers[server.pid] = server
    state = State(server.pid, f"http://127.0.0.1:{port}/api", time.time(), idle)
    partial = folder / f"server.json.{os.getpid()}"
    partial.write_text(json.dumps(state.__dict__))
    partial.replace(folder / "server.json")
    return state


def connect() -> Server:
    """The server this command's flows report to, per `mode()`: PREFECT_API_URL's, numerate's
    background server (started when none runs), or Prefect's temporary one."""
    chosen = mode()
    check_prefect_home()  # before anything is made there
    if chosen == "external":  # its URL first: Prefect's settings named a malformed one
        api_answers(os.environ["PREFECT_API_URL"])  # `PREFECT={}` (before anything is made)
        check_prefect_settings()
        return External()
    server: Server = Temporary() if chosen == "temporary" else Background()  # first: Prefect,
    try:  # imported next, reads its address (PREFECT_API_URL) as it is imported
        check_prefect_settings()  # Prefect's import (0.7 s) while the server starts
    except ConfigError:
        server.abandon()
        raise
    return server


def in_use(folder: Path) -> bool:
    """Whether a numerate command holds the server now."""
    try:
        with (folder / "users.lock").open("a") as users:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    return False


def terminate(state: State, grace: float = 15.0) -> None:
    """TERM the server (it stops gracefully, up to 10 s), then KILL it after `grace` s."""
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, sig)
        deadline = time.monotonic() + wait_s
        while alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive(state.pid):
            return
