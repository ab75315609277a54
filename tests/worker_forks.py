"""Workers for the tests, forked from one interpreter that has already imported the worker.

A worker's start is mostly imports: about 1 s of CPU for the worker's own modules in each
of the ~150 workers a run of the suite starts (measured with process accounting,
docs/benchmarks.md). Chroma's (1 s more) are paid by the process a worker starts for Chroma
when it first writes a vector (memory_anchor/worker/index/chroma_child.py): that one is forked
too, by the Chroma forker (tests/chroma_forks.py). A user's machine
pays that once a session; the suite paid it in a quarter of its CPU. So each pytest process
keeps one **forker**: `python -m tests.worker_forks`, which imports what a worker imports,
starts no thread, and then forks a process per worker it is asked for. The child sets the
test's environment, working directory, log and command line, and runs the same
`memory_anchor.worker.__main__.main` that `python -m memory_anchor.worker run` runs, on a real port, on real storage.

What is not tested this way: how a worker process is started. The hooks, the launcher, the
CLI's `worker start` and tests/test_worker_lifecycle.py's own `python -m memory_anchor.worker` processes
start workers as users' machines do. `TEST_WORKER_FORKS=0` starts every worker with
`python -m memory_anchor.worker run` (start_worker falls back to it too when the forker cannot run).

The protocol, one JSON object a line: the test side writes {"argv", "env", "cwd", "log"};
the forker answers {"pid"} (or {"error"}), and {"exited": pid, "code": c} when a worker ends
(code as subprocess gives it: negative for a signal).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator, NoReturn

ROOT = Path(__file__).resolve().parent.parent
# Room in the forker's own command line for a worker's: a child writes its command line
# over it (below), so that `ps` and the tests' stray-process reaper see which data dir it serves.
_ROOM = "-" * 4096


# --- the forker (its own process) ---------------------------------------------------------------


def _preload() -> None:
    """Import what a worker imports, before any test's environment is known; start no thread."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as memory_anchor/worker/__main__.py sets it before numpy loads
    # Not chromadb: the worker never imports it (Chroma runs in a child process of its own).
    # Not onnxruntime (30 ms): importing it starts a native thread, which a fork would not copy.
    import memory_anchor.worker.__main__  # noqa: F401
    import memory_anchor.worker.app  # noqa: F401
    import tests.chroma_forks  # noqa: F401 - what a worker's Chroma processes are started with
    # The MCP SDK, which a worker imports at its first MCP session (about a second of CPU): under the
    # stress run that took more than the SDK client's fixed 10 s for `server/discover`. A worker started
    # plainly (as the hooks start one) still imports it then.
    import memory_anchor.mcp.endpoint  # noqa: F401


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _set_command_line(argv: list[str]) -> None:
    """Show `argv` as this process's command line, written over the forker's own (Linux)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (proc(5) fields 48, 49)
        text = "\0".join(argv).encode() + b"\0"
        if len(text) > end - start:
            return
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            memory.write(text.ljust(end - start, b"\0"))
    except (OSError, ValueError, IndexError):
        pass  # only what `ps` shows


def run_forked(become: Callable[[], int]) -> NoReturn:
    """In a forked child: run `become` (what the child is set up as, then its program), print what it
    raised, and exit with its code at once: never back into the forker's loop, whose cleanup is not
    the child's (tests/chroma_forks.py forks its processes the same way)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        code = become()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        import logging

        logging.shutdown()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _run_child(request: dict, forker_fds: list[int]) -> NoReturn:
    """In the forked child: become the worker the request describes, and exit with its code."""

    def become() -> int:
        for fd in forker_fds:  # the forker's pipes are not the worker's
            os.close(fd)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("chroma_forks"):  # its Chroma processes forked too (tests/chroma_forks.py)
            from tests import chroma_forks

            chroma_forks.install(request["chroma_forks"])
        argv = request["argv"]
        _set_command_line([sys.executable, "-m", "memory_anchor.worker", *argv])
        sys.argv = [str(ROOT / "memory_anchor" / "worker" / "__main__.py"), *argv]
        import memory_anchor.worker.__main__

        return memory_anchor.worker.__main__.main(argv)

    run_forked(become)


def serve() -> int:
    """The forker's loop: fork a worker per request on stdin, report each one's exit on stdout."""
    _preload()
    if _threads() != 1:  # a fork copies only the thread that forks: refuse rather than fork a broken worker
        print(json.dumps({"error": f"the forker has {_threads()} threads after its imports"}), flush=True)
        return 1
    import gc

    gc.collect()
    gc.freeze()  # what the imports made stays shared with every child, page for page
    requests, answers = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a stray print must not break the protocol
    wake_read, wake_write = woken_by_child_exits()
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    children: set[int] = set()
    pending = b""

    def answer(message: dict) -> None:
        os.write(answers, (json.dumps(message) + "\n").encode())

    while True:
        for key, _ in selector.select():
            if key.fd == wake_read:
                os.read(wake_read, 4096)
                _report_exits(answer, children)
                continue
            chunk = os.read(requests, 65536)
            if not chunk:  # the pytest process is gone: so are its workers
                for pid in children:
                    os.kill(pid, signal.SIGKILL)
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _run_child(request, [requests, answers, wake_read, wake_write, selector.fileno()])
                children.add(pid)
                answer({"pid": pid})


def signal_unless_reaped(pid: int, sig: int) -> None:
    """Signal a forked child as Popen.send_signal does: one its forker has just reaped, whose exit
    report is still on the way, is no error."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def woken_by_child_exits() -> tuple[int, int]:
    """A pipe that a child's exit writes to (SIGCHLD through the wakeup fd): a forker's loop selects
    on its read end beside its requests, and reaps (`reaped`) when it is readable."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    return wake_read, wake_write


def reaped() -> Iterator[tuple[int, int]]:
    """(pid, exit code) of each child that has exited, without waiting; a signal's code is its
    number negated, as Popen.returncode gives it (tests/chroma_forks.py reaps its children so too)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, (-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _report_exits(answer, children: set[int]) -> None:
    for pid, code in reaped():
        children.discard(pid)
        answer({"exited": pid, "code": code})


# --- the test side ----------------------------------------------------------------------------------


class ForkedWorker:
    """A forked worker, with the part of subprocess.Popen's interface the tests use."""

    def __init__(self, forker: Forker, pid: int):
        self._forker = forker
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._forker.exit_code(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            code = self._forker.exit_code(self.pid, timeout=timeout)
            if code is None:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            self.returncode = code
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            signal_unless_reaped(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Forker:
    """The test side of one forker process: `spawn` a worker, learn when it exits."""

    def __init__(self) -> None:
        self.env = _forker_env()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.worker_forks", _ROOM], cwd=ROOT, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._spawned: list[dict] = []
        self._exits: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, name="worker-forker", daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return self._process.poll() is None

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path, timeout: float = 60.0) -> ForkedWorker:
        request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)}
        if env.get("TEST_CHROMA_FORKS", "1") != "0":
            from tests import chroma_forks

            try:
                request["chroma_forks"] = chroma_forks.address()
            except OSError:
                pass  # its Chroma processes start as `python -m`
        with self._lock:  # one request at a time: its answer is the next pid
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
            with self._changed:
                if not self._changed.wait_for(lambda: self._spawned or not self.alive(), timeout):
                    raise RuntimeError("the worker forker did not answer")
                if not self._spawned:
                    raise RuntimeError("the worker forker exited")
                answer = self._spawned.pop(0)
        if "error" in answer:
            raise RuntimeError(f"the worker forker cannot fork: {answer['error']}")
        return ForkedWorker(self, answer["pid"])

    def exit_code(self, pid: int, *, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or not self.alive(), timeout)
            return self._exits.get(pid)

    def _read(self) -> None:
        for line in self._process.stdout:
            message = json.loads(line)
            with self._changed:
                if "exited" in message:
                    self._exits[message["exited"]] = message["code"]
                else:
                    # A pid comes back in use after enough processes: an earlier worker's exit under
                    # it is not this one's. (The forker answers a fork before it can reap the child.)
                    self._exits.pop(message.get("pid"), None)
                    self._spawned.append(message)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        if self.alive():
            self._process.stdin.close()  # the forker stops its workers and exits
            try:
                self._process.wait(20)
            except subprocess.TimeoutExpired:
                self._process.kill()


_forker: Forker | None = None
_forker_lock = threading.Lock()
_broken = ""  # why this process's forker could not fork a worker: then workers start plainly


# What an interpreter reads as it starts (PYTHONPATH and sitecustomize, glibc's and the math
# libraries' tuning): a forked worker would not. A test that sets one of these for its worker
# (test_first_run blocks an import through sitecustomize) gets a worker started plainly.
_READ_AT_START = ("PYTHON", "LD_", "MALLOC_", "GLIBC_", "OPENBLAS_", "OMP_", "MKL_")


def _forker_env() -> dict[str, str]:
    # As worker_env (tests/conftest.py) does: the developer's keys stay out of the forker, whose
    # environment is what /proc shows as every forked worker's first one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMORY_ANCHOR_", "CLAUDE_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _read_at_start(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_READ_AT_START)}


def spawn(argv: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> ForkedWorker | None:
    """A worker forked from this pytest process's forker (started at first use), or None when
    it is to be started plainly: TEST_WORKER_FORKS=0, no /proc (not Linux), an environment that
    an interpreter reads as it starts other than the forker's, or a forker that could not fork
    (said once, as a warning in pytest's summary)."""
    global _forker, _broken
    if os.environ.get("TEST_WORKER_FORKS", "1") == "0" or not Path("/proc/self/task").is_dir() or _broken:
        return None
    if _read_at_start(env) != _read_at_start(_forker.env if _forker else _forker_env()):
        return None
    with _forker_lock:
        try:
            if _forker is None or not _forker.alive():
                _forker = Forker()
            return _forker.spawn(argv, env=env, cwd=cwd, log=log)
        except RuntimeError as exc:
            import warnings

            _broken = str(exc)
            warnings.warn(f"workers start as `python -m memory_anchor.worker run` from now on: {exc}", stacklevel=2)
            return None


def close() -> None:
    """Stop this process's forker (at the end of the test session)."""
    if _forker is not None:
        _forker.close()


if __name__ == "__main__":
    sys.exit(serve())
