"""The first run on the machines users have: which Python builds the environment,
what the user is told while memory is not working, the spool's cap, and `doctor`.

Machines are simulated with a PATH of symlinks to this image's pyenv Pythons: a
Mac's `python3` is the Command Line Tools' 3.9, often with a newer one beside it.
The real environment build runs in the unreachable-index test, which recovers with it:
a real pip against the index, into the venv a first attempt left (copied, tests/venvs.py);
the dependencies come from this suite's own environment (the full install from the index,
venv and all, is tests/e2e's first run).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_anchor.core import paths
from memory_anchor.hookkit import launcher, pythons, spool, status
from memory_anchor.core.processes import ALREADY_RUNNING_EXIT
from tests.conftest import ROOT, in_threads, tool_use_event
from tests.test_hooks import HOOKS, base_payload, hook_argv, spool_lines

PY39 = next(iter(sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))), None)
# A Python 3.10+ with venv: the one this test suite runs on, outside its virtual environment.
NEWER = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
NEWER_VERSION = "%d.%d" % sys.version_info[:2]
needs_39 = pytest.mark.skipif(PY39 is None, reason="needs pyenv's Python 3.9 (~/.pyenv/versions/3.9.*)")


def shims(directory: Path, **names: str) -> Path:
    """A bin directory of symlinks: name -> interpreter."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, target in names.items():
        (directory / name.replace("_", ".")).symlink_to(target)
    return directory


def machine_env(home: Path, bin_dir: Path, data_dir: Path, **extra: str) -> dict[str, str]:
    """A user's environment: only `bin_dir` on PATH, an empty HOME (no pyenv, no uv)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMORY_ANCHOR_", "CLAUDE_", "PYTHON", "PYENV", "UV_", "XDG_"))}  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    env.update(PATH=str(bin_dir), HOME=str(home), MEMORY_ANCHOR_DATA_DIR=str(data_dir))
    env["MEMORY_ANCHOR_HOOKS_FOREGROUND"] = "1"  # the spool and the worker start, looked at once the hook returns
    env.update(extra)
    return env


def hook(event: str, payload: dict, env: dict[str, str], plugin: Path = ROOT) -> subprocess.CompletedProcess:
    """A hook as Claude Code runs it: `python3 -S` (whatever python3 PATH gives)."""
    return subprocess.run(
        hook_argv(event, plugin), input=json.dumps(payload).encode(), env=env,
        capture_output=True, timeout=60,
    )  # fmt: skip


def session_start_output(env: dict[str, str], session: str, plugin: Path = ROOT) -> dict:
    result = hook("SessionStart", base_payload("SessionStart", session, "/tmp/p", source="startup"), env, plugin)
    assert result.returncode == 0 and not result.stderr, result
    return json.loads(result.stdout) if result.stdout.strip() else {}


def wait_for(predicate, timeout: float, message: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


# --- which Python -----------------------------------------------------------------------------


@needs_39
def test_python3_39_with_a_newer_python_on_path_builds_with_the_newer(tmp_path, monkeypatch):
    bin_dir = shims(tmp_path / "bin", python3=PY39, **{f"python{NEWER_VERSION}": NEWER})
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PYENV_ROOT", raising=False)
    chosen = pythons.choose(str(tmp_path / "data"), current=str(bin_dir / "python3"))
    assert (chosen.path, chosen.version_text, chosen.how) == (str(bin_dir / f"python{NEWER_VERSION}"), NEWER_VERSION, "PATH")


@needs_39
def test_a_pyenv_python_off_path_is_found(tmp_path, monkeypatch):
    pyenv_bin = shims(tmp_path / "home" / ".pyenv" / "versions" / "3.12.1" / "bin", **{f"python{NEWER_VERSION}": NEWER})
    bin_dir = shims(tmp_path / "bin", python3=PY39)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PYENV_ROOT", raising=False)
    chosen = pythons.choose(str(tmp_path / "data"), current=str(bin_dir / "python3"))
    assert chosen.path == str(pyenv_bin / f"python{NEWER_VERSION}") and chosen.how == str(pyenv_bin)


@needs_39
def test_only_python_39_says_what_to_install(tmp_path, monkeypatch):
    bin_dir = shims(tmp_path / "bin", python3=PY39)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PYENV_ROOT", raising=False)
    with pytest.raises(pythons.NoPython) as raised:
        pythons.choose(str(tmp_path / "data"), current=str(bin_dir / "python3"))
    assert raised.value.problem == "it needs Python 3.10+, found 3.9"
    assert "3.1" in raised.value.fix and [c.version_text for c in raised.value.seen] == ["3.9"]


@needs_39
def test_the_python_setting_wins_and_a_wrong_one_is_named(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PATH", str(shims(tmp_path / "bin", python3=PY39)))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (data / "settings.json").write_text(json.dumps({"python": NEWER}))
    assert pythons.choose(str(data), current=PY39).how == "the python setting"
    (data / "settings.json").write_text(json.dumps({"python": PY39}))
    with pytest.raises(pythons.NoPython) as raised:
        pythons.choose(str(data), current=NEWER)  # even though the hooks' python3 would do
    assert raised.value.problem == f"the `python` setting names {PY39}, which is Python 3.9"


# --- telling the user ---------------------------------------------------------------------------


@needs_39
def test_only_python_39_the_user_is_told_once_per_session_and_events_are_kept(tmp_path):
    data = tmp_path / "data"
    env = machine_env(tmp_path / "home", shims(tmp_path / "bin", python3=PY39), data)

    first = session_start_output(env, "s1")
    assert first["systemMessage"].startswith("Memory Anchor is setting up its Python environment")
    assert "events are kept" in first["systemMessage"]
    assert "installing itself" in first["hookSpecificOutput"]["additionalContext"]
    wait_for(lambda: (data / launcher.FAILED_MARKER).exists(), 60, "the bootstrap to give up")
    assert "it needs Python 3.10+, found 3.9" in (data / "logs" / "bootstrap.log").read_text()

    assert hook("UserPromptSubmit", base_payload("UserPromptSubmit", "s1", "/tmp/p", prompt="hi"), env).stdout == b""
    assert hook("PostToolUse", tool_use_event("s1", 1), env).stdout == b""

    second = session_start_output(env, "s2")
    message = second["systemMessage"]
    assert message.startswith("Memory Anchor is off: it needs Python 3.10+, found 3.9 (")
    assert "events are kept" in message and "memory_anchor/hookkit/doctor.py" in message
    assert "\n" not in message
    assert "is off: it needs Python 3.10+" in second["hookSpecificOutput"]["additionalContext"]
    names = [e["payload"]["hook_event_name"] for e in spool_lines(data)]
    assert names == ["SessionStart", "UserPromptSubmit", "PostToolUse", "SessionStart"]


def test_a_build_this_hook_starts_is_setting_up_even_when_it_fails_before_the_hook_speaks(tmp_path, monkeypatch):
    """The bootstrap runs beside the hook that set it off and can fail before that hook prints (no
    Python 3.10+ is found in milliseconds). What a session is told says how it began: setting up;
    the build's reason is told by the next session, as the test above shows."""
    from memory_anchor.hookkit import runner

    data = tmp_path / "data"
    data.mkdir()
    version = launcher.plugin_version(str(ROOT))

    def start_a_build_that_fails_at_once(plugin_root, data_dir, *, retry_now=False):
        status.record_failure(data_dir, version, "it needs Python 3.10+, found 3.9", "install Python 3.10+", "")
        return launcher.BOOTSTRAP_STARTED

    monkeypatch.setattr(launcher, "ensure_worker", start_a_build_that_fails_at_once)
    monkeypatch.setattr(launcher, "worker_python", lambda root, data_dir: None)
    hook = runner.Hook("SessionStart", json.dumps(base_payload("SessionStart", "s1", "/tmp/p")).encode(), str(data))
    hook.finish_delivery(None)  # no worker: spooled, and a build started
    user, _ = runner.memory_notice(hook, str(ROOT))
    assert user.startswith("Memory Anchor is setting up its Python environment")

    later = runner.Hook("SessionStart", json.dumps(base_payload("SessionStart", "s2", "/tmp/p")).encode(), str(data))
    monkeypatch.setattr(launcher, "ensure_worker", lambda plugin_root, data_dir, *, retry_now=False: "waiting")
    later.finish_delivery(None)
    user, _ = runner.memory_notice(later, str(ROOT))
    assert user.startswith("Memory Anchor is off: it needs Python 3.10+, found 3.9 (install Python 3.10+)")


def test_a_worker_that_does_not_start_is_reported(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # The developer route with an interpreter that exits at once: the worker never comes up.
    env = machine_env(tmp_path / "home", Path(NEWER).parent, data, MEMORY_ANCHOR_PYTHON="/bin/false")
    env["PATH"] = os.environ["PATH"]
    assert "systemMessage" not in session_start_output(env, "s1")  # just asked to start: give it time
    # A minute later it still has not written worker.json.
    marker = data / status.WORKER_START_MARKER
    marker.write_text(f"{time.time() - 120:.3f}\n")
    os.utime(marker, (time.time() - 120, time.time() - 120))
    out = session_start_output(env, "s2")
    assert out["systemMessage"].startswith("Memory Anchor is off: its worker does not start")
    assert "worker.stderr.log" in out["systemMessage"]


@pytest.mark.parametrize("exit_code, failed", [(None, False), (1, True), (0, True), (ALREADY_RUNNING_EXIT, False)])
def test_session_start_waits_only_for_a_worker_that_is_coming(monkeypatch, exit_code, failed):
    """The worker SessionStart just started: still running, or beaten by another worker
    (`ALREADY_RUNNING_EXIT`, that one is coming) is waited for; one that exited is not."""
    script = "import time; time.sleep(60)" if exit_code is None else f"raise SystemExit({exit_code})"
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        if exit_code is not None:
            child.wait(30)
        monkeypatch.setattr(launcher, "_started", child)
        assert launcher.started_worker_failed() is failed
    finally:
        child.kill()
        child.wait()
    monkeypatch.setattr(launcher, "_started", None)  # it started none (throttled): wait as before
    assert launcher.started_worker_failed() is False


def test_a_reachable_worker_means_no_message_but_dropped_events_are_told_once(worker, tmp_path):
    env = machine_env(tmp_path / "home", Path(NEWER).parent, worker.data_dir, MEMORY_ANCHOR_PYTHON="/bin/true")
    env["PATH"] = os.environ["PATH"]
    assert "systemMessage" not in session_start_output(env, "s1")
    # While it was away the spool overflowed (spool.py leaves this count behind).
    (worker.data_dir / spool.DROPPED_MARKER).write_text("42 100 1700000000\n")
    message = session_start_output(env, "s2")["systemMessage"]
    assert message == ("Memory Anchor is back on; the spool reached its 100 MB cap and its 42 oldest events "
                       "were dropped while it was off.")  # fmt: skip
    assert "systemMessage" not in session_start_output(env, "s3")


# --- the spool's cap ----------------------------------------------------------------------------


def test_the_spool_keeps_the_newest_events_past_its_cap(tmp_path):
    spool_file = str(tmp_path / "spool.jsonl")
    cap = 20_000
    lines = [spool.spool_entry(f"id-{i}", json.dumps({"n": i, "pad": "x" * 150}).encode(), "PostToolUse", None, None)
             for i in range(400)]  # fmt: skip
    dropped = sum(spool.append(spool_file, line, cap) for line in lines)
    kept = [json.loads(line) for line in Path(spool_file).read_text().splitlines()]
    numbers = [e["payload"]["n"] for e in kept]
    assert numbers == list(range(400 - len(numbers), 400))  # the newest, in order, none torn
    assert dropped == 400 - len(numbers) > 0
    assert os.path.getsize(spool_file) <= cap
    count, cap_mb = (tmp_path / spool.DROPPED_MARKER).read_text().split()[:2]
    assert int(count) == dropped and cap_mb == spool.megabytes(cap) == "0.0191"


def test_concurrent_appends_while_trimming_lose_only_the_oldest(tmp_path):
    spool_file = str(tmp_path / "spool.jsonl")
    cap = 50_000

    def writer(name: str) -> None:
        for i in range(300):
            line = spool.spool_entry(f"{name}-{i}", json.dumps({"w": name, "n": i, "pad": "y" * 100}).encode(),
                                     "PostToolUse", None, None)  # fmt: skip
            spool.append(spool_file, line, cap)

    in_threads(writer, [(f"w{k}",) for k in range(4)])
    kept = [json.loads(line) for line in Path(spool_file).read_text().splitlines()]
    dropped = int((tmp_path / spool.DROPPED_MARKER).read_text().split()[0])
    assert len(kept) + dropped == 4 * 300
    for name in (f"w{k}" for k in range(4)):  # each writer's kept events are its newest, in order
        numbers = [e["payload"]["n"] for e in kept if e["payload"]["w"] == name]
        assert numbers == list(range(300 - len(numbers), 300))
    assert not [p for p in os.listdir(tmp_path) if ".trimming" in p or ".kept" in p or ".newer" in p]


def test_the_cap_comes_from_the_environment_then_settings(tmp_path, monkeypatch):
    monkeypatch.delenv(spool.CAP_ENV, raising=False)
    assert spool.cap_bytes(str(tmp_path)) == 100 * 2**20
    (tmp_path / "settings.json").write_text(json.dumps({"spool_max_mb": 5}))
    assert spool.cap_bytes(str(tmp_path)) == 5 * 2**20
    monkeypatch.setenv(spool.CAP_ENV, "0.5")
    assert spool.cap_bytes(str(tmp_path)) == 2**19


@needs_39
def test_a_capped_spool_is_reported_to_the_user(tmp_path):
    data = tmp_path / "data"
    env = machine_env(tmp_path / "home", shims(tmp_path / "bin", python3=PY39), data, MEMORY_ANCHOR_SPOOL_MAX_MB="0.02")
    for n in range(12):
        hook("PostToolUse", tool_use_event("s1", n, output="z" * 3000), env)
    out = session_start_output(env, "s1")
    assert "the spool reached its 0.02 MB cap and its" in out["systemMessage"]
    assert "oldest events were dropped" in out["systemMessage"]
    assert "kept the newest" in (data / "logs" / "hooks.log").read_text()
    assert spool_lines(data)[-1]["payload"]["hook_event_name"] == "SessionStart"


# --- what the environment leaves out ------------------------------------------------------------


def test_the_worker_runs_without_the_kubernetes_client(tmp_path):
    """The bootstrap removes chromadb's kubernetes dependency (126 MB): a real worker that cannot
    import it still stores, embeds into Chroma, searches and restarts."""
    from tests.conftest import start_worker, worker_env

    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['kubernetes'] = None  # import fails\n")
    data = tmp_path / "data"
    env = worker_env(data, PYTHONPATH=f"{ROOT}{os.pathsep}{blocker}")
    for round_ in range(2):  # the second start reopens the Chroma files
        worker = start_worker(data, env=env)
        try:
            if round_ == 0:
                worker.post("/api/v1/memories", {"content": "The release train leaves on Thursdays",
                                                 "user_id": "k8s", "infer": False})  # fmt: skip
                worker.wait_idle()
            hits = worker.post("/api/v1/memories/search", {"query": "when does the release train leave?",
                                                           "filters": {"user_id": "k8s"}, "top_k": 3})["results"]  # fmt: skip
            assert hits and hits[0]["memory"] == "The release train leaves on Thursdays"
        finally:
            assert worker.stop() == 0
    assert any((data / paths.CHROMA).iterdir())
    log = (data / "logs" / paths.WORKER_LOG).read_text()
    assert "kubernetes" not in log


# --- doctor ---------------------------------------------------------------------------------------


@needs_39
def test_doctor_with_only_python_39(tmp_path):
    data = tmp_path / "data"
    env = machine_env(tmp_path / "home", shims(tmp_path / "bin", python3=PY39), data)
    result = subprocess.run(["python3", "-S", str(ROOT / "memory_anchor" / "hookkit" / "doctor.py"), "--data-dir", str(data)],
                            env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "ok    interpreter: this is Python 3.9" in result.stdout
    fail = lines.index(next(l for l in lines if l.startswith("FAIL  interpreter: no Python fits: it needs Python 3.10+")))
    assert lines[fail + 1].startswith("      fix: ")
    assert "FAIL  environment: not built yet" in result.stdout


def test_doctor_all_good_with_a_running_worker(worker, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ANCHOR_", "ANTHROPIC_"))}
    env.update(MEMORY_ANCHOR_PYTHON=sys.executable, ANTHROPIC_API_KEY="sk-ant-test")
    result = subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(worker.data_dir), "doctor"],
                            env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok    worker: memory-anchor" in result.stdout
    assert "ok    embedder: the local model embeds (384 dimensions)" in result.stdout
    assert "ok    claude: ANTHROPIC_API_KEY is set" in result.stdout
    assert result.stdout.rstrip().endswith("all good")


def test_doctor_reports_a_failed_build_with_its_fix(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    status.record_failure(str(data), launcher.plugin_version(str(ROOT)), "the disk is full", "free some disk space", "OSError 28")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_ANCHOR_")}
    result = subprocess.run(["python3", "-S", str(ROOT / "memory_anchor" / "hookkit" / "doctor.py"), "--data-dir", str(data)],
                            env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "FAIL  environment: building it failed: the disk is full" in result.stdout
    assert "      fix: free some disk space; then rebuild now: python3 -S -m memory_anchor.hookkit.bootstrap" in result.stdout
    assert result.returncode == 1


# --- an unreachable package index, a read-only plugin root: the real build --------------------


def closed_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_read_only(root: Path):
    """Really read-only, even for root (a read-only bind mount); else by permissions."""
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(root), str(root)], capture_output=True)
        if mounted.returncode != 0:
            pytest.skip(f"cannot make a read-only mount here: {mounted.stderr.decode()[:200]}")
        return lambda: subprocess.run(["umount", str(root)], check=True)
    subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
    return lambda: subprocess.run(["chmod", "-R", "u+w", str(root)], check=True)


def seed_dependencies(env_dir: Path) -> None:
    """Give a leftover environment the plugin's dependencies from this suite's own environment
    (hard links, so it costs no copy), as an attempt cut off mid-install leaves them.

    Installing them all from the index is what tests/e2e's first run proves, with the real
    build; doing it twice costs a full install per run. The recovery's pip still runs for real
    against the index and installs the plugin itself. Without a virtual environment to share
    (the suite on a system Python), nothing is seeded and the recovery builds everything.
    """
    import shutil
    import sysconfig

    from tests.venvs import link_or_copy

    if sys.prefix == sys.base_prefix:
        return
    ours = Path(sysconfig.get_paths()["purelib"])
    target = env_dir / ours.relative_to(sys.prefix)
    assert target.is_dir(), f"the failed attempts left no environment at {env_dir}"

    def project(name: str) -> str:
        return name.split("-")[0].lower()

    # What the venv came with (pip, setuptools) stays its own, and the plugin, installed editable
    # here (pointing at this checkout), is what the recovery's pip installs.
    own = {project(p.name) for p in target.iterdir()}
    skip = {p.name for p in ours.iterdir() if project(p.name) in own or p.name.startswith(("__editable__", "memory_anchor"))}
    shutil.copytree(ours, target, dirs_exist_ok=True, copy_function=link_or_copy,
                    ignore=lambda directory, names: skip if Path(directory) == ours else ())  # fmt: skip


# A real venv and pip against the index, from a read-only plugin root.
@pytest.mark.timeout(2400)
def test_unreachable_index_then_recovery_from_a_read_only_plugin(tmp_path, venv_template):
    """pip cannot reach its index: the user is told why, events are kept; once the index is
    back the next session builds the environment and every kept event is ingested. The plugin
    root is read-only all along (as a shared or packaged install can be)."""
    import sqlite3

    from tests.e2e.harness import copy_plugin
    from tests.venvs import copy_venv

    plugin = copy_plugin(tmp_path / "plugin")
    data = tmp_path / "data"
    # The venv a first attempt made before pip failed (tests/venvs.py; tests/test_hook_bootstrap.py and
    # tests/e2e's first run make it from nothing): what fails here, and is retried, is pip.
    copy_venv(venv_template, data / "env" / launcher.plugin_version(str(plugin)))
    bin_dir = shims(tmp_path / "bin", python3=NEWER)
    restore = make_read_only(plugin)
    try:
        offline = machine_env(tmp_path / "home", bin_dir, data, PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS="",
                              PIP_INDEX_URL=f"http://127.0.0.1:{closed_port()}/simple", PIP_RETRIES="0",
                              PIP_EXTRA_INDEX_URL="")  # fmt: skip
        first = session_start_output(offline, "s1", plugin)
        assert first["systemMessage"].startswith("Memory Anchor is setting up")
        wait_for(lambda: (data / launcher.FAILED_MARKER).exists(), 300, "pip to give up")
        for n in range(3):
            assert hook("PostToolUse", tool_use_event("s1", n), offline, plugin).returncode == 0
        failed_at = (data / launcher.FAILED_MARKER).stat().st_mtime_ns
        second = session_start_output(offline, "s2", plugin)
        assert second["systemMessage"].startswith(
            "Memory Anchor is off: its packages could not be downloaded (package index unreachable) (check the network")
        assert "events are kept" in second["systemMessage"]
        wait_for(lambda: (data / launcher.FAILED_MARKER).stat().st_mtime_ns > failed_at
                 and not launcher.bootstrap_running(str(data)), 300, "the retry to fail too")  # fmt: skip

        seed_dependencies(data / "env" / launcher.plugin_version(str(plugin)))
        # The index is back (this machine's own pip configuration): the next session recovers.
        online = machine_env(tmp_path / "home", bin_dir, data)
        third = session_start_output(online, "s3", plugin)
        assert "trying again now" in third["systemMessage"]
        wait_for(lambda: (data / "worker.json").exists(), 1200, "the environment build and the worker")
        db_path = data / paths.DATABASE

        def ingested():
            if not db_path.exists():
                return False
            with sqlite3.connect(db_path) as db:
                keys = {row[0] for row in db.execute("SELECT dedup_key FROM inbox")}
            return {f"tool:toolu_s1_{n}" for n in range(3)} <= keys and not (data / paths.SPOOL).exists()

        wait_for(ingested, 120, "the spooled events to reach the inbox")
        fourth = session_start_output(online, "s4", plugin)
        assert "systemMessage" not in fourth
        assert not (data / launcher.FAILED_MARKER).exists()
    finally:
        worker_info = data / paths.WORKER_INFO
        if worker_info.exists():
            try:
                os.kill(json.loads(worker_info.read_text())["pid"], 15)
            except (OSError, ValueError, KeyError):
                pass
        restore()
