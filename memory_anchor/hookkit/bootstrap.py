"""Build the plugin's Python environment, then (re)start the worker.

Run by a hook as a detached process on a machine that has only `python3`:

    python3 -S -m memory_anchor.hookkit.bootstrap <plugin root> <data dir>

1. take `<data dir>/bootstrap.lock` (flock; a second bootstrap exits at once),
2. find a Python 3.10+ (`pythons.py`: this one, or a newer one beside it),
   create a venv with it in `<data dir>/env/<plugin version>/` and `pip install`
   the plugin into it from a clean copy of the plugin root (the root may be
   read-only, and pip's in-tree build would litter it),
3. mark it ready, stop a worker still running an older version, start the new
   one (which ingests what the hooks spooled meanwhile), remove older
   environments.

pip uses the machine's own configuration (index, proxies, wheel cache). A
failure is logged to `logs/bootstrap.log` and recorded in `bootstrap.failed`
with its cause and fix in plain words (`status.py`), which SessionStart shows
the user; hooks retry later instead of at every tool use.

This module runs on whatever `python3` the hooks have, 3.9 included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from memory_anchor.core import paths
from memory_anchor.hookkit import launcher, pythons, status, wire
from memory_anchor.core.processes import pid_alive

# What a plugin copy needs to be pip-installed; the rest (tests, node_modules,
# a developer's venv) can be hundreds of megabytes.
_NOT_INSTALLED = ("tests", "node_modules", ".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", "bench")


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} bootstrap[{os.getpid()}]: {message}", flush=True)


class StepFailed(RuntimeError):
    """A command of the build failed; `output` is its tail, to tell the user why."""

    def __init__(self, message: str, output: str):
        super().__init__(message)
        self.output = output


def _run(argv: list[str], timeout: float) -> None:
    """Run a step, its output both in the log and kept (its tail) to explain a failure."""
    log("$ " + " ".join(argv))
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, universal_newlines=True,
        errors="replace",
    )  # fmt: skip
    import threading

    timed_out = []

    def kill() -> None:  # a silent, hung pip is stopped too
        timed_out.append(True)
        process.kill()

    watchdog = threading.Timer(timeout, kill)
    watchdog.start()
    tail = []
    try:
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()  # the log shows progress as it happens
            tail.append(line)
            del tail[:-200]
        sys.stdout.flush()
        returncode = process.wait()
    finally:
        watchdog.cancel()
    if timed_out:
        raise StepFailed(f"{os.path.basename(argv[0])} {' '.join(argv[1:3])} timed out after {timeout:.0f} s", "".join(tail))
    if returncode != 0:
        raise StepFailed(f"{os.path.basename(argv[0])} {' '.join(argv[1:3])} exited with status {returncode}", "".join(tail))


def build_environment(plugin_root: str, data_dir: str, env_dir: str) -> None:
    python = launcher.environment_python(env_dir)
    existing = pythons.probe(python, "the environment") if os.path.exists(python) else None
    if existing is None or existing.version < pythons.MINIMUM:  # none yet, broken, or made by a 3.9
        chosen = pythons.choose(data_dir, sys.executable, log=log)
        log(f"building with Python {chosen.version_text} at {chosen.path} ({chosen.how})")
        shutil.rmtree(env_dir, ignore_errors=True)
        _run([chosen.path, "-m", "venv", env_dir], timeout=300)
    with tempfile.TemporaryDirectory(prefix="memory-anchor-build-") as build:
        source = os.path.join(build, "memory-anchor")
        shutil.copytree(plugin_root, source, ignore=shutil.ignore_patterns(*_NOT_INSTALLED), symlinks=True)
        # --no-compile: byte-compiling every installed module (150 MB of .pyc, mostly never
        # imported) costs much of pip's CPU time; Python compiles what it imports, once.
        _run(
            [python, "-m", "pip", "install", "--upgrade", "--no-input", "--disable-pip-version-check", "--no-compile",
             source],
            timeout=1800,
        )  # fmt: skip
    remove_unused(python)


# Installed as dependencies but never imported by the worker: chromadb needs the
# kubernetes client (126 MB, a fifth of the environment) only for its distributed
# server, never for the embedded PersistentClient. `pip check` reports it missing;
# tests/test_first_run.py proves the embedded path does not import it.
UNUSED_PACKAGES = ("kubernetes",)


def remove_unused(python: str) -> None:
    try:
        _run([python, "-m", "pip", "uninstall", "--yes", "--quiet", *UNUSED_PACKAGES], timeout=300)
    except StepFailed as exc:  # a fatter environment still works
        log(f"could not remove {', '.join(UNUSED_PACKAGES)}: {exc}")


# pip's words for "the package index cannot be reached" (no network, a proxy, a dead mirror).
_NETWORK_SIGNS = (
    "NewConnectionError", "Connection refused", "ConnectTimeoutError", "ProxyError", "Max retries exceeded",
    "Temporary failure in name resolution", "Name or service not known", "nodename nor servname", "SSLError",
    "No matching distribution found", "Could not fetch URL", "Network is unreachable",
)  # fmt: skip


def explain(exc: BaseException) -> tuple[str, str]:
    """(problem, fix) in a user's words for a failed build."""
    if isinstance(exc, pythons.NoPython):
        return exc.problem, exc.fix
    output = getattr(exc, "output", "") + " " + repr(exc)
    if "No space left on device" in output or getattr(exc, "errno", None) == 28:
        return "the disk is full", "free some disk space, then start a new session"
    if any(sign in output for sign in _NETWORK_SIGNS):
        return (
            "its packages could not be downloaded (package index unreachable)",
            "check the network, proxy or pip's index settings, then start a new session",
        )
    if "ensurepip" in output or "venv" in str(exc):
        return "a virtual environment could not be created", "install Python's venv module (e.g. python3-venv)"
    return f"building its environment failed ({exc})", "see logs/bootstrap.log in its data dir"


def stop_worker(data_dir: str, python: str, pid: int) -> None:
    """Stop a worker of another version, with the new version's CLI when possible."""
    log(f"stopping the running worker (pid {pid}) to upgrade it")
    try:
        _run([python, "-m", "memory_anchor.cli.main", "--data-dir", data_dir, "worker", "stop"], timeout=60)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        log(f"`worker stop` failed ({exc}); sending SIGTERM")
        import signal

        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + 30
    while time.time() < deadline and pid_alive(pid):
        time.sleep(0.2)


def remove_other_environments(data_dir: str, keep: str) -> None:
    root = paths.data_file(paths.ENVIRONMENT, data_dir)
    for name in os.listdir(root) if os.path.isdir(root) else ():
        if name != keep:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 -m memory_anchor.hookkit.bootstrap <plugin root> <data dir>", file=sys.stderr)
        return 2
    plugin_root, data_dir = (os.path.abspath(a) for a in argv)
    os.makedirs(data_dir, 0o700, exist_ok=True)
    import fcntl

    lock_fd = os.open(paths.data_file(paths.BOOTSTRAP_LOCK, data_dir), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        log("another bootstrap is running; leaving it to finish")
        return 0

    version = launcher.plugin_version(plugin_root)
    env_dir = launcher.environment_dir(data_dir, version)
    python = launcher.environment_python(env_dir)
    failed = paths.data_file(launcher.FAILED_MARKER, data_dir)
    if not launcher.environment_ready(data_dir, version):
        started = time.time()
        log(f"building the environment for memory-anchor {version} in {env_dir} (this is Python {sys.version.split()[0]})")
        try:
            build_environment(plugin_root, data_dir, env_dir)
        except Exception as exc:  # any failure must be recorded, not raised into nowhere
            problem, fix = explain(exc)
            log(f"FAILED: {problem} ({exc!r}); fix: {fix}. Hooks keep spooling events and retry "
                f"in {launcher.BOOTSTRAP_RETRY_SECONDS:.0f} s or at the next session start")  # fmt: skip
            status.record_failure(data_dir, version, problem, fix, getattr(exc, "output", "") or repr(exc))
            return 1
        with open(os.path.join(env_dir, launcher.READY_MARKER), "w", encoding="utf-8") as handle:
            handle.write(version + "\n")
        if os.path.exists(failed):
            os.remove(failed)
        log(f"environment ready in {time.time() - started:.1f} s")
    running = wire.read_worker_info(paths.data_file(paths.WORKER_INFO, data_dir))
    if running is not None and pid_alive(running.pid):
        if running.version == version:
            log(f"worker {version} already running")
            remove_other_environments(data_dir, keep=version)
            return 0
        stop_worker(data_dir, python, running.pid)
    launcher.start_worker(plugin_root, data_dir, throttle=False)
    log("worker started")
    remove_other_environments(data_dir, keep=version)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
