"""Start the worker, or the build of its environment, without waiting for either.

Which Python runs the worker:
1. `$MEMORY_ANCHOR_PYTHON` (a developer checkout: an existing environment that
   has the dependencies; the plugin root goes on its PYTHONPATH), else
2. the environment the plugin built for its current version,
   `<data dir>/env/<version>/`, once `bootstrap.py` has marked it ready, else
3. nobody yet: the hook starts `bootstrap.py` in the background and spools.

Everything here runs only when the worker did not answer (or once per session
start), never on a hook's fast path, so it may import subprocess and json.
"""

from __future__ import annotations

import os
import sys
import time

from memory_anchor.core import paths
from memory_anchor.hookkit import status, wire

PYTHON_ENV_VAR = "MEMORY_ANCHOR_PYTHON"
READY_MARKER = ".memory-anchor-ready"
FAILED_MARKER = status.FAILED_MARKER
WORKER_START_MARKER = status.WORKER_START_MARKER
# Parallel hooks that all find the worker down start it once, not once each.
WORKER_START_THROTTLE_SECONDS = 10.0
# A failed environment build (no network, no venv module) is retried this much later.
BOOTSTRAP_RETRY_SECONDS = 300.0
BOOTSTRAP_STARTED = "environment bootstrap started"


def plugin_version(plugin_root: str) -> str:
    """The `version` of `.claude-plugin/plugin.json`, made safe for a directory name."""
    try:
        with open(os.path.join(plugin_root, ".claude-plugin", "plugin.json"), encoding="utf-8") as handle:
            text = handle.read()
        try:
            version = wire._quick_scalar(text, "version")
        except ValueError:
            import json

            version = json.loads(text).get("version")
    except OSError:
        version = None
    version = str(version or "0")
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in version)


def environment_dir(data_dir: str, version: str) -> str:
    return os.path.join(paths.data_file(paths.ENVIRONMENT, data_dir), version)


def environment_python(env_dir: str) -> str:
    if sys.platform.startswith("win"):
        return os.path.join(env_dir, "Scripts", "python.exe")
    return os.path.join(env_dir, "bin", "python")


def environment_ready(data_dir: str, version: str) -> bool:
    """Built, and its interpreter still there (a Homebrew upgrade removes the Python a venv points to)."""
    env_dir = environment_dir(data_dir, version)
    return os.path.exists(os.path.join(env_dir, READY_MARKER)) and os.path.exists(environment_python(env_dir))


def worker_python(plugin_root: str, data_dir: str) -> tuple[str, dict[str, str]] | None:
    """(python, extra environment) able to run the worker now, or None until bootstrapped."""
    developer = os.environ.get(PYTHON_ENV_VAR, "").strip()
    if developer:
        pythonpath = os.environ.get("PYTHONPATH", "")
        return developer, {"PYTHONPATH": plugin_root + (os.pathsep + pythonpath if pythonpath else "")}
    version = plugin_version(plugin_root)
    if environment_ready(data_dir, version):
        return environment_python(environment_dir(data_dir, version)), {}
    return None


def _spawn_detached(argv: list[str], env: dict[str, str], cwd: str, log_file: str):
    """Start a process in its own session with no link to the hook's pipes.

    Claude Code waits for a hook's stdout/stderr to close, so the child must not
    inherit them; it also must not die with the hook's process group.
    """
    import subprocess

    os.makedirs(os.path.dirname(log_file), 0o700, exist_ok=True)
    with open(log_file, "ab") as log:
        kwargs = {"start_new_session": True} if os.name == "posix" else {
            "creationflags": getattr(subprocess, "DETACHED_PROCESS", 0)
            | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        }
        return subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True, **kwargs
        )


def _recently(path: str, seconds: float) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime < seconds
    except OSError:
        return False


# The worker this process started last, if any: SessionStart asks whether it is still coming.
_started = None


def started_worker_failed() -> bool:
    """Whether the worker this process started has exited already, and not because another
    worker holds the data dir (that one is on its way): then no worker is coming to wait for."""
    from memory_anchor.core.processes import ALREADY_RUNNING_EXIT

    return _started is not None and _started.poll() not in (None, ALREADY_RUNNING_EXIT)


def start_worker(plugin_root: str, data_dir: str, *, throttle: bool = True) -> bool:
    """Start `python -m memory_anchor.worker run` in the background; False when it cannot run yet.

    The worker's own lock makes a second, racing start exit at once, so the
    throttle is about CPU (each start imports the whole stack), not correctness.
    """
    found = worker_python(plugin_root, data_dir)
    if found is None:
        return False
    marker = paths.data_file(WORKER_START_MARKER, data_dir)
    if throttle and _recently(marker, WORKER_START_THROTTLE_SECONDS):
        return True
    status.note_worker_start(data_dir)
    python, extra = found
    env = dict(os.environ)
    env.update(extra)
    env["MEMORY_ANCHOR_DATA_DIR"] = data_dir
    global _started
    _started = _spawn_detached(
        [python, "-m", "memory_anchor.worker", "run", "--data-dir", data_dir],
        env,
        data_dir,
        # The worker logs to logs/worker.log itself; this catches what it prints before that.
        paths.data_file(os.path.join(paths.LOGS, "worker.stderr.log"), data_dir),
    )
    return True


def bootstrap_running(data_dir: str) -> bool:
    """Whether a bootstrap process holds the lock right now."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the bootstrap's own lock attempt decides
        return False
    lock_file = paths.data_file(paths.BOOTSTRAP_LOCK, data_dir)
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we may have taken
    return False


def start_bootstrap(plugin_root: str, data_dir: str, *, retry_now: bool = False) -> bool:
    """Build (or upgrade to) this plugin version's environment in the background.

    False when a build is already running or failed recently for this version;
    `retry_now` (a new session: the user may just have fixed the cause) skips the wait.
    """
    if bootstrap_running(data_dir):
        return False
    failed = paths.data_file(FAILED_MARKER, data_dir)
    if not retry_now and _recently(failed, BOOTSTRAP_RETRY_SECONDS):
        try:
            with open(failed, encoding="utf-8") as handle:
                if handle.readline().strip() == plugin_version(plugin_root):
                    return False
        except OSError:
            pass
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["MEMORY_ANCHOR_DATA_DIR"] = data_dir
    _spawn_detached(
        [sys.executable, "-S", "-m", "memory_anchor.hookkit.bootstrap", plugin_root, data_dir],
        env,
        plugin_root,  # `-m` finds memory_anchor through the working directory
        paths.data_file(os.path.join(paths.LOGS, paths.BOOTSTRAP_LOG), data_dir),
    )
    return True


def ensure_worker(plugin_root: str, data_dir: str, *, retry_now: bool = False) -> str:
    """Get a worker going by whichever step is next; returns what was done (for the log)."""
    if start_worker(plugin_root, data_dir):
        return "worker starting"
    if start_bootstrap(plugin_root, data_dir, retry_now=retry_now):
        return BOOTSTRAP_STARTED
    return "waiting for the environment bootstrap"


def upgrade_if_needed(plugin_root: str, data_dir: str, running: wire.WorkerInfo) -> bool:
    """After a plugin update, build the new version's environment (which restarts the worker).

    The running worker says its version in worker.json; a developer's worker
    (`$MEMORY_ANCHOR_PYTHON`) is theirs to restart.
    """
    if os.environ.get(PYTHON_ENV_VAR, "").strip() or running.version is None:
        return False
    if running.version == plugin_version(plugin_root):
        return False
    return start_bootstrap(plugin_root, data_dir)
