"""A throwaway PostgreSQL server for tests and benchmarks.

``initdb`` into a temporary folder, ``postgres`` listening on a Unix socket in
that folder only (no TCP port, so parallel runs never collide), stopped and
deleted at exit; in between, :meth:`~PostgresServer.stop` and
:meth:`~PostgresServer.start` (or :meth:`~PostgresServer.restart`) stop it and
start it again on the same socket and data, as a database restart would.
PostgreSQL refuses to run as root, so when the tests run as root the cluster
is made and run as the ``postgres`` OS user the Debian package creates. The
binaries come from ``pg_config --bindir`` or the Debian layout
(``/usr/lib/postgresql/<version>/bin``); ``.ci/run`` installs the package when
it is missing.

Usage::

    with PostgresServer() as server:
        dsn = server.dsn  # "postgresql:///deepactors?host=/tmp/...&user=..."
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["PostgresServer", "postgres_bindir"]


def postgres_bindir() -> Path | None:
    """The folder holding ``initdb``/``pg_ctl``/``postgres``, or None when not installed."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.insert(0, out.stdout.strip())
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "postgres").exists():
            return Path(folder)
    return None


class PostgresServer:
    """A private PostgreSQL cluster on a Unix socket (see the module docstring).

    Args:
        database: The database created for the caller.
        max_connections: The server's connection limit (tests open many pools).
        durable: Keep PostgreSQL's crash-safe defaults (``fsync``, synchronous
            commit); benchmarks want them, tests run faster without.
    """

    def __init__(
        self, *, database: str = "deepactors", max_connections: int = 200, durable: bool = False
    ) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise RuntimeError(
                "PostgreSQL is not installed (no initdb found); "
                "on Debian: apt-get install -y postgresql"
            )
        self._bin = bindir
        self._database = database
        self._max_connections = max_connections
        self._durable = durable
        self._count = 0
        self._root: Path | None = None
        self._as: tuple[int, int] | None = None
        self._options = ""
        self._created_db = False

    @property
    def socket_dir(self) -> Path:
        """The folder holding the server's socket."""
        assert self._root is not None, "server not started"
        return self._root

    @property
    def user(self) -> str:
        """The database superuser name."""
        return "postgres" if self._as is not None else pwd.getpwuid(os.getuid()).pw_name

    @property
    def running(self) -> bool:
        """Whether the server is up (started and not stopped since)."""
        return self._root is not None and (self._data / "postmaster.pid").exists()

    @property
    def dsn(self) -> str:
        """A libpq connection string for the caller's database."""
        return f"postgresql:///{self._database}?host={self.socket_dir}&user={self.user}"

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            user=self._as[0] if self._as is not None else None,
            group=self._as[1] if self._as is not None else None,
            env={**os.environ, "LC_ALL": "C"},
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")

    def start(self) -> None:
        """Start the server, creating the cluster first time; returns once it accepts connections.

        After :meth:`stop`, starts the same cluster again: same data, same socket.
        """
        if self._root is None:
            self._create()
        self._run(
            str(self._bin / "pg_ctl"),
            "-D",
            str(self._data),
            "-o",
            self._options,
            "-l",
            str(self.socket_dir / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        if not self._created_db:
            self._run(
                str(self._bin / "createdb"),
                "-h",
                str(self.socket_dir),
                "-U",
                self.user,
                self._database,
            )
            self._created_db = True

    def _create(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="deepactors-pg-"))
        if os.getuid() == 0:
            entry = pwd.getpwnam("postgres")
            self._as = (entry.pw_uid, entry.pw_gid)
            os.chown(self._root, entry.pw_uid, entry.pw_gid)
        self._run(
            str(self._bin / "initdb"),
            "-D",
            str(self._data),
            "-U",
            self.user,
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self._options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self._root}' "
            f"-c max_connections={self._max_connections} -c shared_buffers=64MB"
        )
        if not self._durable:
            self._options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"

    @property
    def _data(self) -> Path:
        return self.socket_dir / "data"

    def new_database(self) -> str:
        """Create another empty database on this server; returns its DSN."""
        self._count += 1
        name = f"{self._database}_{self._count}"
        self._run(str(self._bin / "createdb"), "-h", str(self.socket_dir), "-U", self.user, name)
        return f"postgresql:///{name}?host={self.socket_dir}&user={self.user}"

    def stop(self, *, mode: str = "fast") -> None:
        """Stop the server, keeping its data: :meth:`start` starts it again.

        Args:
            mode: ``pg_ctl``'s shutdown mode: ``fast`` ends every session (as a
                restart does), ``immediate`` as a crash would.
        """
        if self._root is None:
            return
        self._run(str(self._bin / "pg_ctl"), "-D", str(self._data), "-m", mode, "-w", "stop")

    def restart(self) -> None:
        """Stop the server, then start it again on the same socket and data."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server (if running) and delete its folder."""
        if self._root is None:
            return
        try:
            if self.running:
                self.stop()
        finally:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
