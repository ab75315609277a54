"""Shared fixtures: a real worker process on a real port, with its own data dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import chroma_forks, worker_forks

ROOT = Path(__file__).resolve().parent.parent
# Data too large or too personal for the repository (LoCoMo, real sessions), read-only, beside the
# checkout; tests that need it are skipped where it is absent.
SHARED = ROOT.parent / "shared"

pytest_plugins = ["tests.fakes.fixtures"] if (ROOT / "tests" / "fakes" / "fixtures.py").exists() else []


def worker_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a worker: no real API key, this data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMORY_ANCHOR_", "CLAUDE_"))}
    env["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    env["PYTHONPATH"] = str(ROOT)
    # The key or nothing: a worker under test never reaches the developer's own Claude Code login.
    env["MEMORY_ANCHOR_LLM_ROUTE"] = "api"
    env.update(extra)
    return env


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test starts from the environment the session started with: the benches a test runs
    in-process set MEMORY_ANCHOR_* for themselves (the local route, their data dir), and under
    xdist whichever test ran next in the same process inherited them."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _chroma_processes_forked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Chroma processes a test's own stores start (memory_anchor/worker/index/chroma_child.py)
    are forked with chromadb imported (tests/chroma_forks.py), as forked workers' are: about 1 s of
    CPU less each. Tests marked `chroma_plain`, or run with TEST_CHROMA_FORKS=0, start them as
    users' machines do (`python -m`)."""
    if os.environ.get("TEST_CHROMA_FORKS", "1") == "0" or request.node.get_closest_marker("chroma_plain"):
        return
    if not Path("/proc/self/task").is_dir():
        return
    from memory_anchor.worker.index.chroma_child import ChromaChild

    monkeypatch.setattr(ChromaChild, "_start", ChromaChild._start)  # put back after the test
    chroma_forks.install(chroma_forks.address)


@pytest.fixture(autouse=True)
def _no_developers_claude_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process, the Claude Code CLI is found only where a test's `claude_cli_path` points:
    a test never spends the developer's own Claude Code login."""
    from memory_anchor.worker.llm import claude_cli

    real = claude_cli.locate
    monkeypatch.setattr(
        claude_cli, "locate", lambda configured="", *, env=None: real(configured, env=env) if configured.strip() else None
    )


@dataclass
class RunningWorker:
    """A worker subprocess and what a test needs to talk to it."""

    process: subprocess.Popen | worker_forks.ForkedWorker
    data_dir: Path
    port: int
    token: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self, method: str, path: str, body: Any = None, *, token: str | None = "", raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:  # fmt: skip
        """(status, parsed JSON) for one request; token "" means the worker's own, None means none."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        if token is not None:
            request.add_header("Authorization", f"Bearer {token or self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = response.read()
                return response.status, json.loads(payload) if payload else None
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            return exc.code, json.loads(payload) if payload else None

    def get(self, path: str, **kwargs: Any) -> Any:
        status, body = self.request("GET", path, **kwargs)
        assert status == 200, (status, body)
        return body

    def post(self, path: str, body: Any, expect: int = 200, **kwargs: Any) -> Any:
        status, answer = self.request("POST", path, body, **kwargs)
        assert status == expect, (status, answer)
        return answer

    def wait_idle(self, timeout: float = 240.0) -> None:
        """Until the inbox has nothing pending and every record is embedded.

        `timeout` only catches a pipeline that hangs: the pipeline runs at nice 10, so on a
        machine whose cores are all busy (`make test-stress`) its first pass, which loads the
        embedding model, took over 60 s (measured at load 20 on 2 cores).
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.get("/api/v1/status")
            if not status["inbox"].get("pending") and not status["pending_vectors"]:
                return
            time.sleep(0.1)
        raise AssertionError(f"worker not idle after {timeout}s: {status}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_worker(data_dir: Path, *, env: dict[str, str] | None = None, timeout: float = 60.0) -> RunningWorker:
    """Start the worker (`python -m memory_anchor.worker run`) on a free port and wait until it answers.

    It is forked from this process's worker forker (tests/worker_forks.py: the same worker, its
    imports already made), or started as `python -m memory_anchor.worker run` with TEST_WORKER_FORKS=0.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    info_path = data_dir / "worker.json"
    previous = info_path.read_text() if info_path.exists() else None
    env = env or worker_env(data_dir)
    argv = ["run", "--data-dir", str(data_dir), "--port", "0"]
    # tests/worker_forks.py: the same worker, forked with its imports already made
    process = worker_forks.spawn(argv, env=env, cwd=ROOT, log=data_dir / "worker-test.log")
    if process is None:
        with open(data_dir / "worker-test.log", "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "memory_anchor.worker", *argv], cwd=ROOT, env=env, stdout=log,
                                       stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited with {process.returncode}: {(data_dir / 'worker-test.log').read_text()[-3000:]}")
        if info_path.exists() and info_path.read_text() != previous:
            try:
                info = json.loads(info_path.read_text())
            except ValueError:
                time.sleep(0.05)
                continue
            if info.get("pid") == process.pid:
                worker = RunningWorker(process, data_dir, info["port"], info["token"], env)
                try:
                    worker.get("/api/health", token=None)
                    return worker
                except (OSError, AssertionError):
                    pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("worker did not start in time")


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


@pytest.fixture(autouse=True)
def reap_stray_processes(tmp_path: Path):
    """After each test, stop whatever it left running in its temp dir.

    Hooks start workers and environment builds detached, as they must in a
    user's session; a test must not leave them behind for the next one.
    """
    yield
    if not Path("/proc").is_dir():
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _processes_mentioning(str(tmp_path))
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() and _running(pid) for pid in pids):
            time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    _python3_past_pyenvs_shim()


def _python3_past_pyenvs_shim() -> None:
    """`python3` from PATH, as the hooks are run, without pyenv's shim in front of it.

    The shim is a bash script that asks pyenv which Python to run: 0.12 s of CPU a call against
    0.01 s for the interpreter itself, and the tests run the hooks a few hundred times. The
    interpreter's own directory goes first on PATH: the same `python3` the shim would pick.
    """
    import shutil

    found = shutil.which("python3")
    if not found or os.path.basename(os.path.dirname(found)) != "shims":
        return
    try:
        real = subprocess.run([found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                              timeout=60, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return
    if real:
        os.environ["PATH"] = os.path.dirname(real) + os.pathsep + os.environ.get("PATH", "")


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker_forks.close()  # its workers first: their Chroma processes end with them
    chroma_forks.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked `both_backends` runs each test that starts a worker once per storage backend;
    module scope, so a module's shared worker is started once per backend, not once per test."""
    if metafunc.definition.get_closest_marker("both_backends") and "worker_backend" in metafunc.fixturenames:
        metafunc.parametrize("worker_backend", BACKENDS, indirect=True, scope="module")


@pytest.fixture(scope="module")
def worker_backend(request) -> str:
    """Where the suite's workers keep their records: "sqlite" (the data dir) unless the module is
    marked `both_backends`."""
    return getattr(request, "param", "sqlite")


def _start_on(request, backend: str, data_dir: Path) -> RunningWorker:
    """A worker on `backend`, checked to be there: a test run "on postgres" really ran on it."""
    running = start_worker(data_dir, env=_backend_env(request, backend, data_dir))
    store = running.get("/api/v1/status")["store"]
    if store["backend"] != {"sqlite": "sqlite", "postgres": "postgresql"}[backend] or not store["reachable"]:
        running.stop()
        raise AssertionError(f"the worker for {backend} runs on {store}")
    return running


def _backend_env(request, backend: str, data_dir: Path) -> dict[str, str] | None:
    """The worker's environment for `backend`: on "postgres" a fresh team database, copied from the
    session's template, reached as the member role "dev" (row-level security in force), dropped
    when `request`'s scope ends."""
    if backend == "sqlite":
        return None
    from tests.postgres import init_team_database, member_url

    cluster = request.getfixturevalue("postgres_cluster")
    name = init_team_database(cluster)
    request.addfinalizer(lambda: cluster.drop_database(name))
    return worker_env(data_dir, MEMORY_ANCHOR_STORAGE_URL=member_url(cluster, name, "dev"))


@pytest.fixture
def worker(request, tmp_path: Path, worker_backend: str):
    """A fresh worker with an empty data dir (and on "postgres" an empty team database), stopped
    after the test."""
    data_dir = tmp_path / "data"
    running = _start_on(request, worker_backend, data_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def shared_worker(request, tmp_path_factory, worker_backend: str):
    """One worker for a whole test module (faster; tests must scope their data)."""
    data_dir = tmp_path_factory.mktemp("shared") / "data"
    running = _start_on(request, worker_backend, data_dir)
    yield running
    running.stop()


def tool_use_event(session_id: str, n: int, *, cwd: str = "/tmp/project-x", output: str | None = None) -> dict:
    """A PostToolUse payload shaped like Claude Code's (see shared/docs/claude-code-e2e.md)."""
    return {
        "session_id": session_id,
        "transcript_path": f"/tmp/.claude/projects/x/{session_id}.jsonl",
        "cwd": cwd,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"echo step-{n}", "description": f"step {n}"},
        "tool_response": {"stdout": output if output is not None else f"step-{n}", "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_{session_id}_{n}",
        "duration_ms": 12,
    }


def wait_for(condition, *, timeout: float = 60.0, what: str = "condition") -> None:
    """Poll `condition()` until it is true: tests wait on what they expect, never on a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(0.05)


def in_threads(work, args: list[tuple], *, timeout: float | None = None) -> None:
    """Run `work(*a)` for each `a` of `args`, each in a thread of its own, all at once; once they
    are joined, raise the first error one of them raised (an assertion inside `work` included)."""
    errors: list[BaseException] = []

    def run(*a) -> None:
        try:
            work(*a)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=a) for a in args]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]


@pytest.fixture(scope="session")
def venv_template(tmp_path_factory) -> Path:
    """A virtual environment made once per session, for tests/venvs.py's `copy_venv`."""
    from tests.venvs import make_venv

    return make_venv(tmp_path_factory.mktemp("venv-template") / "env")


@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL server for the whole test session (tests/postgres.py)."""
    from tests.postgres import start_cluster

    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster) -> str:
    """A fresh, empty database of its own for one test, as the server's superuser."""
    name = postgres_cluster.create_database()
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_db(request, tmp_path):
    """The store on each backend: a real SQLite file, and a real PostgreSQL team database reached
    as a developer's own role (row-level security in force)."""
    if request.param == "sqlite":
        from memory_anchor.worker.store.db import Database

        database = Database(tmp_path / "memory.sqlite3")
    else:
        from tests.postgres import init_team_database, member_url
        from memory_anchor.worker.store.postgres.database import PostgresDatabase

        cluster = request.getfixturevalue("postgres_cluster")
        name = init_team_database(cluster)
        database = PostgresDatabase(member_url(cluster, name, "dev"))
        request.addfinalizer(lambda: cluster.drop_database(name))
    yield database
    database.close()
