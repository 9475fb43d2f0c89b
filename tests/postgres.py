"""A throwaway PostgreSQL on a free loopback port, for the lake's tests: Debian's `postgresql`
(installed by `make`, like Chromium), `initdb` into a temporary folder and `pg_ctl` to start
and stop it. As root (CI, the development machines), the server runs as the `postgres` user,
since PostgreSQL refuses to run as root."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.prefect_server import free_port

INSTALL = "make postgres (or: apt-get install postgresql)"


def binaries() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, pg_ctl), or None."""
    for found in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (found / "initdb").is_file() and (found / "pg_ctl").is_file():
            return found
    return None


@dataclass
class Postgres:
    """A running server: its folder, port and a database for one lake."""

    folder: Path
    port: int
    bin: Path
    user: str | None

    def location(self, database: str = "lake") -> str:
        return f"ducklake:postgres:dbname={database} host=127.0.0.1 port={self.port} user=postgres"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def create_database(self, name: str) -> None:
        done = self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                         name)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"createdb {name}: {done.stderr.strip()}")

    def halt(self) -> None:
        """Stop the server, its files kept (a PostgreSQL lost under a command)."""
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> Postgres:
    """initdb and start a server on a free port of 127.0.0.1; RuntimeError saying why not."""
    found = binaries()
    if found is None:
        raise RuntimeError(f"PostgreSQL is not installed: {INSTALL}")
    user = None
    folder = Path(tempfile.mkdtemp(prefix="numerate-postgres-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            raise RuntimeError("running as root, with no postgres user to run it as") from None
        shutil.chown(folder, user)
    server = Postgres(folder, free_port(), found, user)
    steps = [
        ("initdb", "-D", str(folder / "data"), "-A", "trust", "-U", "postgres", "--no-sync"),
        ("pg_ctl", "-D", str(folder / "data"), "-l", str(folder / "log"), "-w", "-o",
         f"-p {server.port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start"),
    ]  # fmt: skip
    for step in steps:
        done = server._run(*step)
        if done.returncode != 0:
            log = (folder / "log").read_text() if (folder / "log").exists() else ""
            server.stop()
            raise RuntimeError(f"{step[0]} failed: {done.stderr.strip()} {log[-500:]}")
    return server
