"""Chroma processes for the tests, forked from one that has imported chromadb.

A worker runs Chroma in a process of its own (memory_anchor/worker/index/chroma_child.py),
started as `python -m memory_anchor.worker.index.chroma_child <dir>` with the first vector it
writes or reads back. Most of that start is chromadb's imports: about 1 s of CPU, which a run
of the suite paid about 180 times (counted: docs/benchmarks.md), a user's machine once a
session. So each pytest process has a **Chroma forker**, `python -m tests.chroma_forks`
(started at first use): it makes the Chroma process's own preparation (`chroma_child.prepare_process`:
the malloc settings) and chromadb's imports, starts no thread, and forks a Chroma process per
request. That process runs the same `chroma_child.main` on pipes its worker made, so the worker
talks to it as to one it started itself.

Who gets one: the workers forked by tests/worker_forks.py (unless their environment says
`TEST_CHROMA_FORKS=0`), and the stores a test makes in the pytest process (tests/conftest.py),
except in tests marked `chroma_plain` (tests/test_chroma_child.py tests how a worker starts its
Chroma process). Workers started as users' machines start them (by hooks, the CLI, the
benches) start theirs with `python -m`. A forked Chroma process is handed what a Popen child
inherits (environment, working directory, umask, resource limits, stderr); what differs is its
parent: the Chroma forker, not the worker.

The protocol, over a Unix socket per Chroma process: the worker sends one JSON object
{"path", "env", "cwd", "umask", "limits"} (after its length, 4 bytes big-endian) with three file descriptors
(the process's stdin, stdout and stderr); the Chroma forker answers "pid N\\n", and
"exit C\\n" when that process ends (C as subprocess gives it: negative for a signal).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

from tests.worker_forks import _set_command_line, reaped, run_forked, signal_unless_reaped, woken_by_child_exits

_LENGTH = struct.Struct(">I")
_MODULE = "memory_anchor.worker.index.chroma_child"

log = logging.getLogger(__name__)


# --- the Chroma forker (its own process) -------------------------------------------------------------


def _preload() -> None:
    """What the Chroma process does before it serves: its malloc settings, then chromadb's imports
    (those of `import chromadb` and of opening a `PersistentClient`). No thread starts."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the worker sets it, and its children inherit it
    from memory_anchor.worker.index import chroma_child

    chroma_child.prepare_process()
    import chromadb  # noqa: F401
    import chromadb.api.rust  # noqa: F401 - imported by PersistentClient(), not by `import chromadb`
    import chromadb.config  # noqa: F401
    import chromadb.telemetry.product.posthog  # noqa: F401 - likewise

    import memory_anchor.worker.index.chroma_shards  # noqa: F401
    import tests.worker_forks  # noqa: F401 - its _set_command_line, for each forked process


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _receive_request(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(30)
    data, fds, _flags, _address = socket.recv_fds(conn, 1 << 20, 3)
    try:
        while len(data) < _LENGTH.size or len(data) < _LENGTH.size + _LENGTH.unpack(data[: _LENGTH.size])[0]:
            chunk = conn.recv(1 << 20)
            if not chunk:
                raise OSError("the worker closed the connection mid-request")
            data += chunk
        if len(fds) != 3:
            raise OSError(f"expected 3 file descriptors, got {len(fds)}")
        return json.loads(data[_LENGTH.size :]), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _run_child(request: dict, fds: list[int], close) -> NoReturn:
    """In the forked process: become the Chroma process the request describes, and exit with its code."""

    def become() -> int:
        close()  # the forker's socket, pipes and other processes' connections are not this one's
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # What a process started with Popen inherits from its worker: the worker's umask (077: what
        # Chroma creates is private, tests/test_private_files.py) and resource limits.
        os.umask(request["umask"])
        for name, (soft, hard) in request["limits"].items():
            try:
                resource.setrlimit(getattr(resource, name), (soft, hard))
            except (ValueError, OSError):
                pass  # a hard limit above the forker's own: only a privileged process may raise one
        # As `ps` shows a Chroma process started with `python -m`: the tests' stray-process
        # reaper finds one by the data dir on its command line.
        _set_command_line([sys.executable, "-m", _MODULE, request["path"]])
        sys.argv = [_MODULE, request["path"]]
        from memory_anchor.worker.index import chroma_child

        return chroma_child.main([request["path"]])

    run_forked(become)


def serve(listener_fd: int) -> int:
    """Fork a Chroma process per connection on the inherited listening socket; end when stdin closes."""
    listener = socket.socket(fileno=listener_fd)
    _preload()
    if _threads() != 1:  # a fork copies only the thread that forks: refuse, and workers start Chroma plainly
        print(f"tests.chroma_forks: {_threads()} threads after chromadb's imports; not forking", file=sys.stderr)
        return 1
    import gc

    gc.collect()
    gc.freeze()  # what the imports made stays shared with every Chroma process, page for page
    wake_read, wake_write = woken_by_child_exits()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}  # Chroma process -> its worker's connection, told of its exit

    def close_all() -> None:
        selector.close()
        listener.close()
        for conn in waiting.values():
            conn.close()
        os.close(wake_read)
        os.close(wake_write)

    while True:
        for key, _ in selector.select():
            if key.fd == 0:
                if not os.read(0, 4096):  # the pytest process is gone; Chroma processes end with their workers
                    return 0
            elif key.fd == wake_read:
                os.read(wake_read, 4096)
                _report_exits(waiting)
            else:
                conn, _ = listener.accept()
                try:
                    request, fds = _receive_request(conn)
                except (OSError, ValueError) as exc:
                    print(f"tests.chroma_forks: a bad request: {exc}", file=sys.stderr)
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    conn.close()
                    _run_child(request, fds, close_all)
                for fd in fds:  # the worker and the new process hold them now
                    os.close(fd)
                try:
                    conn.sendall(f"pid {pid}\n".encode())
                except OSError:
                    pass  # the worker is gone: its Chroma process sees its stdin close
                waiting[pid] = conn


def _report_exits(waiting: dict[int, socket.socket]) -> None:
    for pid, code in reaped():
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"exit {code}\n".encode())
            except OSError:
                pass
            conn.close()


# --- the worker's side -----------------------------------------------------------------------------------


class ForkedChroma:
    """A Chroma process forked for this worker, with the part of subprocess.Popen's interface
    that `ChromaChild` uses (pid, stdin, stdout, poll, wait, kill, returncode)."""

    def __init__(self, conn: socket.socket, pid: int, stdin, stdout):
        self._conn = conn
        self._pending = b""
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_exit(timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read_exit(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(f"Chroma process {self.pid}", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            signal_unless_reaped(self.pid, sig)

    def _read_exit(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._conn.settimeout(remaining)
            try:
                chunk = self._conn.recv(64)
            except (TimeoutError, BlockingIOError):
                return
            if not chunk:  # the Chroma forker ended first: wait for the process itself
                self.returncode = _wait_unrelated(self.pid, deadline)
                if self.returncode is not None:
                    self._conn.close()
                return
            self._pending += chunk
        word, value = self._pending.split(b"\n", 1)[0].split()
        assert word == b"exit", word
        self.returncode = int(value)
        self._conn.close()


def _wait_unrelated(pid: int, deadline: float | None) -> int | None:
    """Wait for a process that is not this one's child; its exit code is not known here (-1)."""
    while Path(f"/proc/{pid}").exists():
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
    return -1


_LIMITS = [name for name in dir(resource) if name.startswith("RLIMIT_")]


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would change it for every thread meanwhile)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise OSError("no Umask in /proc/self/status")


def start(address: str, path: Path, stderr: int = 2) -> ForkedChroma:
    """A Chroma process for the Chroma directory `path`, forked by the Chroma forker at `address`
    with this process's environment and working directory; OSError when the forker does not answer."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            conn.settimeout(30)
            conn.connect(address)
            body = json.dumps({"path": str(path), "env": dict(os.environ), "cwd": os.getcwd(), "umask": _umask(),
                               "limits": {name: resource.getrlimit(getattr(resource, name)) for name in _LIMITS}}).encode()
            socket.send_fds(conn, [_LENGTH.pack(len(body)) + body], [stdin_read, stdout_write, stderr])
        finally:
            os.close(stdin_read)  # only the Chroma process holds these ends: when this process's
            os.close(stdout_write)  # ends close (it exits, or is killed), that one sees end of file
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = conn.recv(64)
            if not chunk:
                raise OSError("the Chroma forker closed the connection before it forked")
            answer += chunk
        word, value = answer.split()
        if word != b"pid":
            raise OSError(f"the Chroma forker answered {answer!r}")
    except BaseException:
        conn.close()
        os.close(stdin_write)
        os.close(stdout_read)
        raise
    return ForkedChroma(conn, int(value), os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"))


def install(address) -> None:
    """Make this process's Chroma processes come from the Chroma forker at `address` (a path, or a
    function that gives one, starting the forker at first use); started as `python -m` when that
    forker does not answer."""
    from memory_anchor.worker.index.chroma_child import ChromaChild

    plain = ChromaChild._start

    def _start(self: ChromaChild):
        try:
            self._process = start(address() if callable(address) else address, self.path)
        except OSError as exc:
            log.warning("the tests' Chroma forker did not answer (%s): Chroma starts as python -m", exc)
            return plain(self)
        log.debug("forked the Chroma process %d", self._process.pid)
        return self._process

    ChromaChild._start = _start


# --- the test side ------------------------------------------------------------------------------------


class ChromaForker:
    """The Chroma forker process of one pytest process; its socket is bound before it starts, so a
    worker's first request waits in the socket's queue while the forker makes its imports."""

    def __init__(self, env: dict[str, str], room: str):
        import tempfile

        self.directory = Path(tempfile.mkdtemp(prefix="chroma-forks-"))
        self.address = str(self.directory / "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.address)
            listener.listen(64)
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.chroma_forks", str(listener.fileno()), room],
                cwd=Path(__file__).resolve().parent.parent, env=env, stdin=subprocess.PIPE,
                pass_fds=[listener.fileno()],
            )  # fmt: skip
        finally:
            listener.close()

    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        import shutil

        if self.alive():
            self._process.stdin.close()
            try:
                self._process.wait(20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


_forker: ChromaForker | None = None
_forker_lock = threading.Lock()


def forker() -> ChromaForker:
    """This pytest process's Chroma forker, started at first use (OSError when it has exited)."""
    global _forker
    with _forker_lock:
        if _forker is None:
            from tests.worker_forks import _ROOM, _forker_env

            _forker = ChromaForker(_forker_env(), _ROOM)
        if not _forker.alive():
            raise OSError(f"the Chroma forker exited with {_forker._process.returncode}")
        return _forker


def address() -> str:
    return forker().address


def close() -> None:
    """Stop this process's Chroma forker (at the end of the test session)."""
    if _forker is not None:
        _forker.close()


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))

