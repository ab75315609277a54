"""The first run, as a new user has it: from `claude plugin install` to the first captured observation.

    .venv/bin/python -m tests.e2e.bench_first_run [--cache cold|warm|both] [--index pypi|machine]

A fresh HOME with the Mac case on PATH (`python3` is 3.9, a newer Python beside
it), the real Claude Code CLI and the fake Messages API. The plugin is installed
the user's way, one `claude -p` session runs a Bash command, and the clock stops
when that tool use is an observation the worker serves. Prints the times, the
environment's size and its package count.

- `--index pypi` (default): pip sees only pypi.org (this machine's pip
  configuration is ignored), so a cold cache downloads everything, as for a user.
- `--cache cold`: an empty pip cache; `warm`: the cache a cold run filled
  (`both` runs cold then warm, sharing that cache).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from memory_anchor.client.worker_client import WorkerClient
from tests.e2e.harness import RUN_MARKER, ClaudeHome, ScriptedModel, copy_plugin, ensure_claude_installed, mac_like_path
from tests.fakes.anthropic_server import FakeAnthropicServer


def pip_env(index: str, cache: Path) -> dict[str, str]:
    env = {"PIP_CACHE_DIR": str(cache)}
    if index == "pypi":
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="https://pypi.org/simple", PIP_FIND_LINKS="",
                   PIP_EXTRA_INDEX_URL="")  # fmt: skip
    return env


def size_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 2**20


def one_run(label: str, cache: Path, index: str) -> dict:
    marker = f"MARKER-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, FakeAnthropicServer(responder=ScriptedModel(marker)) as fake:
        base = Path(tmp)
        home = ClaudeHome(base / "machine", fake.base_url, developer_python=None)
        # Keep what reaches the network (a proxy's CA, timeouts); drop where packages come from.
        home.env = {k: v for k, v in home.env.items() if not k.startswith("PIP_") or k in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT")}
        home.env.update(pip_env(index, cache), PATH=mac_like_path(base / "bin"))
        plugin = copy_plugin(base / "clone")
        started = time.perf_counter()
        home.install_plugin(plugin)
        installed = time.perf_counter()
        home.run(RUN_MARKER, timeout=300)
        session = time.perf_counter()
        data = home.plugin_data()
        try:
            client = None
            observation = None
            while observation is None:
                if time.perf_counter() - started > 3600:
                    raise SystemExit(f"{label}: no observation after an hour; see {data}/logs/bootstrap.log")
                if (data / "bootstrap.failed").exists():
                    raise SystemExit(f"{label}: the build failed: {(data / 'bootstrap.failed').read_text()[:2000]}")
                if client is None and (data / "worker.json").exists():
                    client = WorkerClient(data, autostart=False)
                if client is not None:
                    try:
                        for obs in client.get("/api/v1/observations", limit=50)["results"]:
                            if obs.get("data", {}).get("command") == f"echo {marker}":
                                observation = obs
                    except Exception:  # noqa: BLE001 - the worker is still starting
                        pass
                time.sleep(0.5)
            done = time.perf_counter()
            log = (data / "logs" / "bootstrap.log").read_text()
            ready = re.search(r"environment ready in ([0-9.]+) s", log)
            env_dir = next((data / "env").iterdir())
            packages = len(glob.glob(str(env_dir / "lib" / "python3*" / "site-packages" / "*.dist-info")))
            return {
                "label": label,
                "plugin install": installed - started,
                "session": session - installed,
                "environment build": float(ready.group(1)) if ready else float("nan"),
                "first observation": done - started,
                "environment MB": size_mb(env_dir),
                "packages": packages,
                "python": re.search(r"building with Python (\S+)", log).group(1),
            }
        finally:
            for info in data.glob("worker.json"):
                try:
                    os.kill(json.loads(info.read_text())["pid"], 15)
                except (OSError, ValueError, KeyError):
                    pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", choices=["cold", "warm", "both"], default="both")
    parser.add_argument("--index", choices=["pypi", "machine"], default="pypi")
    parser.add_argument("--cache-dir", default=None, help="pip cache to use (default: a new temporary one)")
    args = parser.parse_args()
    ensure_claude_installed()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.cache_dir) if args.cache_dir else Path(tmp) / "pip-cache"
        runs = ["cold", "warm"] if args.cache == "both" else [args.cache]
        for label in runs:
            if label == "cold" and cache.exists():
                subprocess.run(["rm", "-rf", str(cache)], check=True)
            result = one_run(label, cache, args.index)
            print(
                f"{label:4} cache ({args.index}): plugin install {result['plugin install']:.1f} s, "
                f"first session {result['session']:.1f} s, environment built in {result['environment build']:.0f} s "
                f"(Python {result['python']}), first observation {result['first observation']:.0f} s after install; "
                f"environment {result['environment MB']:.0f} MB, {result['packages']} packages",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
