"""Starting, finding and stopping the worker.

One worker per data dir, enforced by an exclusive `flock` on `worker.lock` (the
kernel drops it when the process dies, so a crash never leaves a stale lock).
A running worker advertises itself in `worker.json` (mode 0600): pid, port and
the bearer token every client must send.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_anchor.core import paths
from memory_anchor.core.version import __version__
from memory_anchor.core.processes import exited_child, pid_alive


class AlreadyRunning(Exception):
    """Another worker holds the lock for this data dir."""


@dataclass
class WorkerInfo:
    pid: int
    port: int
    token: str
    host: str = "127.0.0.1"
    started_at: float = 0.0
    version: str = ""
    mcp_port: int = 0  # the MCP endpoint the bridges connect to (memory_anchor/worker/api/mcp_endpoint.py)
    # How clients name projects (memory_anchor/core/projects.py): "remote" on a team database, whose
    # developers' clones of one repository sit in different directories.
    project_names: str = "path"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def acquire_lock(data_dir: Path):
    """Hold the data dir's lock for the life of this process, or raise AlreadyRunning."""
    import fcntl

    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle = open(paths.lock_path(data_dir), "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            info = read_info(data_dir)
            where = f" (pid {info.pid}, port {info.port})" if info else ""
            raise AlreadyRunning(f"another Memory Anchor worker is already running for {data_dir}{where}")
        raise
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def bind_socket(host: str, preferred: int) -> socket.socket:
    """A listening socket on loopback: the preferred port, or a free one if it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for port in (preferred, 0):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            if port == 0:
                raise
            continue
        sock.listen(1024)
        sock.setblocking(False)
        return sock
    raise OSError("no port available")


def write_info(data_dir: Path, info: WorkerInfo) -> None:
    """Write worker.json atomically, readable by this user only."""
    path = paths.worker_info_path(data_dir)
    tmp = path.with_name(f".worker.{os.getpid()}.json")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(info.__dict__, handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def read_info(data_dir: Path | None = None) -> WorkerInfo | None:
    try:
        raw = json.loads(paths.worker_info_path(data_dir).read_text())
        return WorkerInfo(**{k: raw[k] for k in WorkerInfo.__dataclass_fields__ if k in raw})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_info(data_dir: Path) -> None:
    """Remove worker.json if it is this process's (a newer worker may have replaced it)."""
    info = read_info(data_dir)
    if info is not None and info.pid == os.getpid():
        try:
            paths.worker_info_path(data_dir).unlink()
        except FileNotFoundError:
            pass


def health(info: WorkerInfo, timeout: float = 1.0) -> dict[str, Any] | None:
    """The worker's /api/health answer, or None if it does not answer."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{info.url}/api/health", timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def running_worker(data_dir: Path | None = None) -> WorkerInfo | None:
    """The worker of this data dir if it is alive and answering."""
    info = read_info(data_dir)
    if info is None or not pid_alive(info.pid):
        return None
    return info if health(info) else None


def start_background(data_dir: Path, *, wait: float = 30.0, python: str | None = None) -> WorkerInfo:
    """Start a detached worker (unless one runs) and wait until it answers."""
    existing = running_worker(data_dir)
    if existing:
        return existing
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_file = paths.log_path(data_dir)
    log_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {**os.environ, "MEMORY_ANCHOR_DATA_DIR": str(data_dir)}
    with open(log_file.with_name("worker.stderr.log"), "ab") as err:
        process = subprocess.Popen(
            [python or sys.executable, "-m", "memory_anchor.worker", "run", "--data-dir", str(data_dir)],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            env=env,
            start_new_session=True,  # survives the hook or CLI that started it
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        info = read_info(data_dir)
        if info and pid_alive(info.pid) and health(info, timeout=0.5):
            return info
        code = process.poll()
        if code is not None:
            info = running_worker(data_dir)  # lost a start race to another worker: fine
            if info:
                return info
            raise RuntimeError(f"worker exited with code {code}; see {log_file.with_name('worker.stderr.log')}")
        time.sleep(0.1)
    raise TimeoutError(f"worker did not answer within {wait:.0f}s; see {log_file}")


def stop(data_dir: Path, *, wait: float = 15.0) -> bool:
    """SIGTERM the worker and wait for it to exit; False if none was running."""
    info = read_info(data_dir)
    if info is None or not pid_alive(info.pid):
        return False
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if exited_child(info.pid) or not pid_alive(info.pid):
            return True
        time.sleep(0.05)
    os.kill(info.pid, signal.SIGKILL)
    return True


def new_info(port: int, token: str, host: str, mcp_port: int = 0, project_names: str = "path") -> WorkerInfo:
    return WorkerInfo(pid=os.getpid(), port=port, token=token, host=host, started_at=time.time(), version=__version__,
                      mcp_port=mcp_port, project_names=project_names)  # fmt: skip
