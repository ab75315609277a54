"""`memory-anchor doctor`: is memory working, and if not, what fixes it.

Runs from the plugin's own files with any `python3`, before (or without) the
plugin's environment:

    python3 <plugin root>/memory_anchor/hookkit/doctor.py [--data-dir D]

and as `memory-anchor doctor` once the environment exists. Standard library
only (the hooks' modules). Checks the interpreter, the environment, the
worker, the data dir and free disk, the embedder, the Claude route, the
Claude Code version (memory_anchor/core/claude_code.py) and another enabled plugin
of the same name (Claude Code then leaves one's hooks out); each problem is printed with the command that fixes it. Exit status 1 when
something is broken.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a file: make the plugin's packages importable
    _ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

from memory_anchor.core import claude_code, paths  # noqa: E402
from memory_anchor.hookkit import launcher, pythons, spool, status, wire  # noqa: E402

# Below this much free space the environment (about 500 MB) or the data cannot grow.
MIN_FREE_BYTES = 1 << 30


class Report:
    """The checks' findings, printed as they come."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.problems = 0

    def ok(self, topic: str, text: str) -> None:
        self.out.write(f"ok    {topic}: {text}\n")

    def info(self, topic: str, text: str) -> None:
        self.out.write(f"note  {topic}: {text}\n")

    def problem(self, topic: str, text: str, fix: str) -> None:
        self.problems += 1
        self.out.write(f"FAIL  {topic}: {text}\n      fix: {fix}\n")


def plugin_root() -> str:
    """This plugin's root: `$CLAUDE_PLUGIN_ROOT`, else the directory above this package."""
    root = os.environ.get("CLAUDE_PLUGIN_ROOT", "").strip()
    if root and os.path.isdir(os.path.join(root, ".claude-plugin")):
        return root
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_data_dir() -> str:
    """The data dir the hooks use. Outside Claude Code `$CLAUDE_PLUGIN_DATA` is unset,
    so look where Claude Code keeps plugin data before falling back to the default."""
    for var in ("MEMORY_ANCHOR_DATA_DIR", "CLAUDE_PLUGIN_DATA"):
        if os.environ.get(var, "").strip():
            return paths.data_dir_str()
    import glob

    config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    found = sorted(glob.glob(os.path.join(config, "plugins", "data", paths.APP_NAME + "*")), key=os.path.getmtime)
    return found[-1] if found else paths.default_user_data_dir_str()


def _tail(path: str, lines: int = 3) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            kept = [line.rstrip() for line in handle.readlines()[-lines:] if line.strip()]
    except OSError:
        return ""
    return " | ".join(kept)


def check_interpreter(report: Report, data_dir: str) -> pythons.Candidate | None:
    here = "%d.%d" % sys.version_info[:2]
    report.ok("interpreter", f"this is Python {here} ({sys.executable})")
    try:
        chosen = pythons.choose(data_dir, sys.executable)
    except pythons.NoPython as exc:
        seen = ", ".join(f"{c.path} ({c.version_text})" for c in exc.seen) or "none"
        report.problem("interpreter", f"no Python fits: {exc.problem} (looked at: {seen})", exc.fix)
        return None
    report.ok("interpreter", f"the environment is built with Python {chosen.version_text}: {chosen.path} ({chosen.how})")
    return chosen


def check_environment(report: Report, root: str, data_dir: str) -> str | None:
    """The Python that runs the worker, when there is one."""
    version = launcher.plugin_version(root)
    developer = os.environ.get(launcher.PYTHON_ENV_VAR, "").strip()
    if developer:
        return _check_developer_python(report, root, developer)
    env_dir = launcher.environment_dir(data_dir, version)
    log = paths.data_file(os.path.join(paths.LOGS, paths.BOOTSTRAP_LOG), data_dir)
    if launcher.environment_ready(data_dir, version):
        report.ok("environment", f"memory-anchor {version} is installed in {env_dir}")
        return launcher.environment_python(env_dir)
    if launcher.bootstrap_running(data_dir):
        report.info("environment", f"being built right now (progress: {log}); events are kept meanwhile")
        return None
    failure = status.read_failure(data_dir)
    if failure is not None and failure[0] == version:
        detail = failure[1].get("detail", "").strip().splitlines()
        report.problem(
            "environment", f"building it failed: {failure[1].get('problem')}"
            + (f" (last output: {detail[-1][:200]})" if detail else "") + f"; log: {log}",
            (failure[1].get("fix") or "see the log")
            + f"; then rebuild now: python3 -S -m memory_anchor.hookkit.bootstrap {root} {data_dir} (run in {root})",
        )  # fmt: skip
        return None
    report.problem(
        "environment", f"not built yet for memory-anchor {version} ({env_dir})",
        f"start a Claude Code session (it builds in the background), or: cd {root} && "
        f"python3 -S -m memory_anchor.hookkit.bootstrap {root} {data_dir}",
    )  # fmt: skip
    return None


def _check_developer_python(report: Report, root: str, python: str) -> str | None:
    import subprocess

    env = dict(os.environ, PYTHONPATH=root)
    try:
        result = subprocess.run([python, "-c", "import aiohttp, chromadb, pydantic, memory_anchor.worker"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                                universal_newlines=True)  # fmt: skip
        failed = result.returncode != 0
        why = (result.stdout.strip().splitlines() or [""])[-1]
    except (OSError, subprocess.SubprocessError) as exc:
        failed, why = True, repr(exc)
    if failed:
        report.problem(
            "environment", f"{launcher.PYTHON_ENV_VAR}={python} cannot import the worker ({why})",
            f"unset {launcher.PYTHON_ENV_VAR} (the plugin then builds its own environment), "
            f"or: {python} -m pip install -e {root}",
        )  # fmt: skip
        return None
    report.ok("environment", f"{launcher.PYTHON_ENV_VAR}={python} (a developer checkout) has the worker's packages")
    return python


def check_worker(report: Report, root: str, data_dir: str, python: str | None) -> bool:
    info = wire.read_worker_info(paths.data_file(paths.WORKER_INFO, data_dir))
    start = (f"{python} -m memory_anchor.cli.main --data-dir {data_dir} worker start" if python
             else "fix the environment first")  # fmt: skip
    stderr_log = paths.data_file(os.path.join(paths.LOGS, "worker.stderr.log"), data_dir)
    if info is None and python is None:
        report.info("worker", "not started: it needs the environment")
        return False
    if info is None:
        report.problem("worker", "no worker has run with this data dir yet", start)
        return False
    try:
        response = wire.send(info, "GET", "/api/health", timeout=3.0).response()
    except OSError as exc:
        last = _tail(stderr_log) or _tail(paths.data_file(os.path.join(paths.LOGS, paths.WORKER_LOG), data_dir))
        report.problem(
            "worker", f"not reachable at {info.host}:{info.port} ({exc.__class__.__name__})"
            + (f"; its last words: {last[-300:]}" if last else ""), start,
        )  # fmt: skip
        return False
    if response.status != 200:
        report.problem("worker", f"answered {response.status} to /api/health", f"restart it: {start.replace(' start', ' stop')} && {start}")
        return False
    running = info.version or "?"
    report.ok("worker", f"memory-anchor {running} answers on {info.host}:{info.port} (pid {info.pid})")
    expected = launcher.plugin_version(root)
    if info.version and info.version != expected and not os.environ.get(launcher.PYTHON_ENV_VAR):
        report.info("worker", f"it runs {info.version} while the plugin is {expected}: the next session upgrades it")
    return True


def check_data_dir(report: Report, data_dir: str) -> None:
    import shutil

    if not os.path.isdir(data_dir):
        report.info("data dir", f"{data_dir} does not exist yet (the first hook creates it)")
        parent = os.path.dirname(data_dir.rstrip(os.sep)) or "."
        probe_dir = parent if os.path.isdir(parent) else os.path.expanduser("~")
    else:
        probe_dir = data_dir
        if not os.access(data_dir, os.W_OK):
            report.problem("data dir", f"{data_dir} is not writable", f"chown -R $USER {data_dir}")
        else:
            report.ok("data dir", data_dir)
    free = shutil.disk_usage(probe_dir).free
    if free < MIN_FREE_BYTES:
        report.problem("disk", f"only {free >> 20} MB free on the data dir's disk (the environment needs about 500 MB)",
                       "free some disk space")  # fmt: skip
    else:
        report.ok("disk", f"{free >> 30} GB free")
    spool_file = paths.data_file(paths.SPOOL, data_dir)
    if os.path.exists(spool_file):
        size, cap = os.path.getsize(spool_file), spool.cap_bytes(data_dir)
        report.info("spool", f"{size >> 10} KB of events wait for the worker (cap {cap >> 20} MB)")
    dropped = status.spool_note(data_dir)
    if dropped:
        report.info("spool", dropped.lstrip("; "))


def check_embedder(report: Report, root: str, python: str | None, data_dir: str) -> None:
    if python is None:
        report.info("embedder", "not checked: there is no environment yet")
        return
    import subprocess

    code = "from memory_anchor.worker.index.embeddings import Embedder; print(len(Embedder().embed_one('memory anchor doctor')))"
    env = dict(os.environ, MEMORY_ANCHOR_DATA_DIR=data_dir)
    if os.environ.get(launcher.PYTHON_ENV_VAR):
        env["PYTHONPATH"] = root
    try:
        result = subprocess.run([python, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=300, universal_newlines=True, cwd=data_dir if os.path.isdir(data_dir) else None)  # fmt: skip
        lines = result.stdout.strip().splitlines()
        ok = result.returncode == 0 and lines and lines[-1].isdigit()
        why = lines[-1] if lines else f"exit status {result.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        ok, why = False, repr(exc)
    if ok:
        report.ok("embedder", f"the local model embeds ({why} dimensions)")
    else:
        report.problem("embedder", f"the local embedding model does not load: {why[:300]}",
                       f"reinstall the environment: rm -r {os.path.dirname(os.path.dirname(python))} "
                       "and start a new session")  # fmt: skip


def check_claude_route(report: Report) -> None:
    """Which way the worker reaches Claude to compress; none is a problem (local works)."""
    import shutil

    if os.environ.get("ANTHROPIC_API_KEY", "").strip():
        report.ok("claude", "ANTHROPIC_API_KEY is set: observations are compressed with the Anthropic API")
        return
    claude = shutil.which("claude")
    if claude:
        report.ok("claude", f"no API key; the Claude Code CLI ({claude}) and its login can compress observations")
        return
    report.info("claude", "no ANTHROPIC_API_KEY and no `claude` on PATH: observations are compressed locally "
                "(works, lower quality); set ANTHROPIC_API_KEY for better summaries")  # fmt: skip


def check_claude_code(report: Report) -> None:
    """The `claude` on PATH is a version the plugin supports, and no other enabled plugin takes its name."""
    import shutil

    claude = shutil.which("claude")
    version = claude_code.installed_version(claude) if claude else None
    supported = f"supported: {claude_code.OLDEST_SUPPORTED} and later"
    if claude is None:
        report.info("claude code", f"no `claude` on PATH: its version is not checked ({supported})")
    elif version is None:
        report.info("claude code", f"`{claude} --version` gave no version ({supported})")
    elif not claude_code.is_supported(version):
        report.problem("claude code", f"Claude Code {version} ({claude}) is older than the oldest this plugin supports "
                       f"({claude_code.OLDEST_SUPPORTED}): hooks may get payloads it cannot read",
                       "update Claude Code: claude update")  # fmt: skip
    else:
        report.ok("claude code", f"Claude Code {version} ({claude}; {supported})")
    same_name = claude_code.enabled_plugins_named(claude_code.PLUGIN_NAME, claude_code.config_dir())
    if len(same_name) > 1:
        others = ", ".join(same_name[1:])
        report.problem("claude code", f"{len(same_name)} enabled plugins are named {claude_code.PLUGIN_NAME}: "
                       f"{', '.join(same_name)}; Claude Code runs the hooks of the first only ({same_name[0]})",
                       f"keep one: claude plugin disable <the others> (here: {others}), or disable {same_name[0]} "
                       "if it is not Memory Anchor")  # fmt: skip


def run(data_dir: str | None = None, out=None) -> int:
    report = Report(out)
    root = plugin_root()
    data_dir = data_dir or find_data_dir()
    report.ok("plugin", f"memory-anchor {launcher.plugin_version(root)} at {root}")
    check_data_dir(report, data_dir)
    check_interpreter(report, data_dir)
    python = check_environment(report, root, data_dir)
    check_worker(report, root, data_dir, python)
    check_embedder(report, root, python, data_dir)
    check_claude_route(report)
    check_claude_code(report)
    report.out.write("all good\n" if not report.problems else f"{report.problems} problem(s) found\n")
    return 1 if report.problems else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="memory-anchor doctor", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None, help="the data dir (default: the one the plugin uses)")
    args = parser.parse_args(argv)
    return run(args.data_dir)


if __name__ == "__main__":
    sys.exit(main())
