"""First run and plugin updates: the environment bootstrap and the helpers the hooks share."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from memory_anchor.core import paths
from memory_anchor.core.version import __version__
from memory_anchor.hookkit import launcher, wire
from tests.conftest import ROOT
from tests.venvs import copy_venv


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"pid": 12, "port": 38120, "token": "abc-_XYZ", "host": "127.0.0.1", "started_at": 1.5, "version": "0.1.0"}),
        json.dumps({"version": "0.1.0", "token": "abc-_XYZ", "port": 38120, "pid": 12}, indent=4),
        '{"port":38120,"token":"abc-_XYZ","pid":12,"version":"0.1.0"}',
    ],
)
def test_worker_json_is_read_without_the_json_module(text):
    info = wire.parse_worker_info(text)
    assert (info.host, info.port, info.token, info.pid, info.version) == ("127.0.0.1", 38120, "abc-_XYZ", 12, "0.1.0")


def test_worker_json_with_escapes_falls_back_to_json_and_bad_files_give_none():
    info = wire.parse_worker_info(json.dumps({"port": 1, "token": 'a"b\\c'}))
    assert info.token == 'a"b\\c'
    assert wire.parse_worker_info("{}") is None
    assert wire.parse_worker_info('{"port": "x", "token": "t"}') is None
    assert wire.parse_worker_info("not json at all") is None


def test_quote_and_event_ids():
    assert wire.quote("/home/me/my proj/ü&x=1") == "%2Fhome%2Fme%2Fmy%20proj%2F%C3%BC%26x%3D1"
    ids = {wire.new_event_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)


def test_versions_agree_across_plugin_package_and_marketplace():
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert plugin["version"] == pyproject["project"]["version"] == __version__ == launcher.plugin_version(str(ROOT))
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert [p["name"] for p in market["plugins"]] == [plugin["name"]] == ["memory-anchor"]


def test_paths_data_dir_matches_platformdirs(monkeypatch, tmp_path):
    import platformdirs

    for var in ("MEMORY_ANCHOR_DATA_DIR", "CLAUDE_PLUGIN_DATA", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    assert paths.data_dir() == Path(platformdirs.user_data_dir(paths.APP_NAME, paths.APP_NAME))
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(tmp_path / "plugin"))
    assert paths.data_dir_str() == str(tmp_path / "plugin")
    monkeypatch.setenv("MEMORY_ANCHOR_DATA_DIR", str(tmp_path / "explicit"))
    assert paths.data_dir() == tmp_path / "explicit"


def test_developer_python_skips_the_bootstrap(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORY_ANCHOR_PYTHON", sys.executable)
    python, extra = launcher.worker_python(str(ROOT), str(tmp_path))
    assert python == sys.executable and extra["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    running = wire.WorkerInfo("127.0.0.1", 1, "t", 1, "0.0.1")
    assert launcher.upgrade_if_needed(str(ROOT), str(tmp_path), running) is False


def test_bootstrap_lock_is_seen_by_hooks(tmp_path):
    assert launcher.bootstrap_running(str(tmp_path)) is False
    fd = os.open(tmp_path / paths.BOOTSTRAP_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert launcher.bootstrap_running(str(tmp_path)) is True
        assert launcher.start_bootstrap(str(ROOT), str(tmp_path)) is False  # nobody else starts one
    finally:
        os.close(fd)


def make_tiny_plugin(root: Path, version: str) -> None:
    """A plugin with the real hookkit but a `memory_anchor.worker` that only records that it was started."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "tiny", "version": version}))
    (root / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "tiny-worker"
        version = "{version}"
        [tool.setuptools.packages.find]
        include = ["memory_anchor*"]
    """))  # fmt: skip
    # The hooks' own code, as in the real plugin; the worker replaced by the recording one.
    subprocess.run(["cp", "-r", str(ROOT / "memory_anchor"), str(root / "memory_anchor")], check=True)
    worker = root / "memory_anchor" / "worker"
    shutil.rmtree(worker)
    worker.mkdir()
    (worker / "__init__.py").write_text(f"VERSION = {version!r}\n")
    (worker / "__main__.py").write_text(textwrap.dedent("""
        import json, os, sys, time
        from memory_anchor import worker
        data = sys.argv[sys.argv.index("--data-dir") + 1]
        with open(os.path.join(data, "started.jsonl"), "a") as f:
            f.write(json.dumps({"version": worker.VERSION, "python": sys.executable}) + "\\n")
    """))  # fmt: skip
    (root / "tests").mkdir()
    (root / "tests" / "huge.bin").write_bytes(b"0" * 1000)  # must not be copied into the build


def run_bootstrap(plugin: Path, data: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ANCHOR_", "PYTHON"))}
    return subprocess.run(
        ["python3", "-S", "-m", "memory_anchor.hookkit.bootstrap", str(plugin), str(data)],
        cwd=plugin, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


# A real venv + pip install (about a minute on a quiet 2-core machine): the first run a user gets.
def test_bootstrap_builds_the_environment_then_upgrades_it(tmp_path, monkeypatch):
    """Real venv + pip install of a small plugin; an update builds the new version and restarts."""
    plugin, data = tmp_path / "plugin", tmp_path / "data"
    make_tiny_plugin(plugin, "1.0.0")
    result = run_bootstrap(plugin, data)
    assert result.returncode == 0, result.stdout + result.stderr
    assert launcher.environment_ready(str(data), "1.0.0")
    python = launcher.environment_python(launcher.environment_dir(str(data), "1.0.0"))
    deadline = time.monotonic() + 30
    while not (data / "started.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    started = [json.loads(l) for l in (data / "started.jsonl").read_text().splitlines()]
    assert started == [{"version": "1.0.0", "python": python}]
    assert "environment ready" in result.stdout

    # A plugin update: a new version in the plugin root.
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "tiny", "version": "1.1.0"}))
    (plugin / "memory_anchor" / "worker" / "__init__.py").write_text("VERSION = '1.1.0'\n")
    monkeypatch.delenv("MEMORY_ANCHOR_PYTHON", raising=False)
    assert launcher.worker_python(str(plugin), str(data)) is None  # 1.1.0 is not built yet
    # Its venv is there, as an update cut off after `python -m venv` leaves it (a copy of 1.0.0's: the
    # build above made one from nothing); the update installs into it, marks it ready, restarts the worker.
    copy_venv(data / paths.ENVIRONMENT / "1.0.0", data / paths.ENVIRONMENT / "1.1.0")
    (data / paths.ENVIRONMENT / "1.1.0" / launcher.READY_MARKER).unlink()
    assert launcher.worker_python(str(plugin), str(data)) is None  # not ready: 1.1.0 is not installed in it
    result = run_bootstrap(plugin, data)
    assert result.returncode == 0, result.stdout + result.stderr
    deadline = time.monotonic() + 30
    while len((data / "started.jsonl").read_text().splitlines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    last = json.loads((data / "started.jsonl").read_text().splitlines()[-1])
    assert last["version"] == "1.1.0"
    assert sorted(os.listdir(data / paths.ENVIRONMENT)) == ["1.1.0"]  # the old environment is gone


def test_failed_bootstrap_is_recorded_and_not_retried_at_every_hook(tmp_path, venv_template):
    plugin, data = tmp_path / "plugin", tmp_path / "data"
    make_tiny_plugin(plugin, "2.0.0")
    copy_venv(venv_template, data / paths.ENVIRONMENT / "2.0.0")  # the venv is made; pip then fails
    (plugin / "pyproject.toml").write_text("this is not toml [")
    result = run_bootstrap(plugin, data)
    assert result.returncode == 1
    assert (data / launcher.FAILED_MARKER).read_text().startswith("2.0.0\n")
    assert "FAILED" in result.stdout
    assert launcher.start_bootstrap(str(plugin), str(data)) is False
