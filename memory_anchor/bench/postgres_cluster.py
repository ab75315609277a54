"""A throwaway PostgreSQL cluster from the machine's own server binaries (tests and `bench team`).

initdb, then pg_ctl start on a free loopback port; `stop()` (`-m immediate`)
removes it whatever happened. PostgreSQL refuses to run as root, so as root the
server runs as the `postgres` user and owns its directories. `pause()` and
`resume()` make an outage on the same port. When the binaries (or, as root, the
`postgres` user) are missing, `start_cluster` raises `ClusterUnavailable` and the
caller decides: the tests skip (or fail under CI), the bench says so.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

BIN_GLOB = "/usr/lib/postgresql/*/bin"
SUPERUSER = "postgres"


class ClusterUnavailable(RuntimeError):
    """No server binaries to start a cluster from (the message says what is missing)."""


def find_bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl."""
    candidates = sorted(Path("/").glob(BIN_GLOB.lstrip("/")), key=lambda p: _version(p.parent.name), reverse=True)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """A running server: `url(database, user)` to reach it, `create_database()` for a fresh one."""

    def __init__(self, bin_dir: Path, base: Path):
        self.bin_dir = bin_dir
        self.base = base
        self.data = base / "data"
        self.log = base / "server.log"
        self.port = 0
        self.team_template: str | None = None  # the tests' schema template (tests/postgres.py)
        self._as_postgres = os.geteuid() == 0

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin_dir / argv[0]), *argv[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({result.returncode}): {result.stderr or result.stdout}")
        return result

    def start(self) -> None:
        if self._as_postgres:
            account = pwd.getpwnam(SUPERUSER)
            os.chown(self.base, account.pw_uid, account.pw_gid)
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", SUPERUSER, "-E", "UTF8", "--no-sync")
        # A port picked free can be taken before the server binds it: try a few.
        for _ in range(5):
            self.port = free_port()
            if self._pg_ctl_start(check=False).returncode == 0:
                return
        raise RuntimeError(f"PostgreSQL did not start: {self.log.read_text()[-2000:] if self.log.exists() else ''}")

    def pause(self) -> None:
        """Stop the server, keeping its data and port: an outage."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again on the same port, after `pause`."""
        self._pg_ctl_start(check=True)

    def _pg_ctl_start(self, *, check: bool) -> subprocess.CompletedProcess:
        return self._run(
            "pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.log),
            "-o", f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start", check=check,
        )  # fmt: skip

    def stop(self) -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres", user: str = SUPERUSER, password: str | None = None) -> str:
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def create_database(self, template: str | None = None) -> str:
        """A new database, empty or a copy of `template`; returns its name."""
        from memory_anchor.worker.store.postgres import admin

        name = "t_" + uuid.uuid4().hex[:12]
        admin.create_database(self.url(), name, template)
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database (closing what still reaches it): a test session creates hundreds."""
        from memory_anchor.worker.store.postgres import admin

        admin.drop_database(self.url(), name)


def start_cluster() -> Cluster:
    """A started cluster (the caller stops it), or ClusterUnavailable saying what is missing."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise ClusterUnavailable("none found")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise ClusterUnavailable(f"running as root, and there is no {SUPERUSER!r} user to run the server as") from None
        if shutil.which("runuser") is None:
            raise ClusterUnavailable("running as root, and runuser is missing")
    # Not under a private tmp dir (pytest's is root's alone): as root the server runs as postgres.
    base = Path(tempfile.mkdtemp(prefix="memory-anchor-pg-"))
    cluster = Cluster(bin_dir, base)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
