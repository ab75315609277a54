"""`memory-anchor bench session`: what the plugin costs a Claude Code session (prints figures).

One-prompt `claude -p` sessions (a Bash tool use, then an answer) with the
real Claude Code CLI (tests/e2e, `make e2e-deps`) against the fake Messages
API, in two fresh HOMEs: one without the plugin, one with it installed the
user's way, its environment already built (this checkout's) and its worker
already running. The two alternate, round by round, so a busy machine slows
both alike. Printed: both medians and their ratio, the bridge's peak RSS (the
`.mcp.json` server every session starts), the worker's RSS, and each hook's
wall time inside a real session.

The per-hook times come from extra sessions whose `python3` is a shell shim
that times the hook processes (the timed sessions run without it): the time
Claude Code waits for each hook, interpreter start included.

Two conditions of Claude Code's own matter, and the bench states both:
- Tool search. With Anthropic's API Claude Code defers MCP tools behind its
  tool search and does not wait for MCP servers before the first request; with
  any other base URL (a proxy, or this fake) it turns tool search off and waits
  for every MCP server first. By default the sessions run as against Anthropic's
  API (`ENABLE_TOOL_SEARCH=true`, which Claude Code's debug log confirms);
  `--proxy` measures the other case.
- The floor. A third HOME has a plugin with nothing in it but its manifest,
  installed the same way: what Claude Code itself spends on any installed
  plugin, which no plugin can save.

`--parts` adds two more HOMEs, the plugin without its MCP server (hooks only)
and without its hooks (MCP server only), so that Memory Anchor's share splits
into what the hook processes cost and what the MCP bridge costs (its start,
and Claude Code's wait for a stdio server to exit, which it polls every 50 ms).
Beside each it runs what any plugin of that shape costs: the same six hook
events each running `cat > /dev/null` (Claude Code's own work per hook), and a
stdio MCP server that answers `initialize` and lists no tools (a process to
start and to wait for at exit). Each is paired against the empty plugin.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {"ratio": 1.35, "bridge_rss_mb": 15}
HOOKS = ["session_start", "user_prompt_submit", "post_tool_use", "stop", "session_end"]
BRIDGE_SCRIPT = "memory_anchor/mcp/server.py"

SHIM = """#!/bin/sh
# Times the plugin's hook processes (bench session); everything else runs as it is.
case "$2" in
  */hooks/*.py)
    start=$(date +%s%N)
    "{python}" "$@"
    code=$?
    echo "$3 $start $(date +%s%N)" >> "{log}"
    exit $code;;
  *) exec "{python}" "$@";;
esac
"""


IDLE_SHIM = """#!/bin/sh
# Times the idle plugin's hook commands (bench session), as SHIM times ours.
start=$(date +%s%N)
"{cat}" "$@"
code=$?
echo "$MA_HOOK $start $(date +%s%N)" >> "{log}"
exit $code
"""


def run(args) -> int:
    if not (ROOT / "tests" / "e2e" / "harness.py").exists():
        print("bench session needs a checkout of the repository (tests/e2e and its fake API)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from tests.e2e.harness import CLAUDE, RUN_MARKER, ClaudeHome, ScriptedModel, copy_plugin
    from tests.fakes.anthropic_server import FakeAnthropicServer

    if not CLAUDE.exists():
        print("the Claude Code CLI is not installed for the e2e tests: run `make e2e-deps` first", file=sys.stderr)
        return 2
    marker = f"MARKER-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="bench-session-") as tmp, \
            FakeAnthropicServer(responder=ScriptedModel(marker)) as fake:  # fmt: skip
        base = Path(tmp)
        plain = ClaudeHome(base / "plain", fake.base_url, developer_python=None)
        empty = ClaudeHome(base / "empty", fake.base_url, developer_python=None)
        plugin = ClaudeHome(base / "plugin", fake.base_url, developer_python=sys.executable)
        # The copies of the plugin with an MCP server, by variant: their bridges run from there.
        sources = {"with": copy_plugin(base / "clone")}
        plugin.install_plugin(sources["with"])
        empty.install_plugin(manifest_only(base / "empty-plugin"))
        order = [("without", plain), ("empty", empty), ("with", plugin)]
        if args.parts:
            # Each HOME has its own plugin data dir, so each variant runs (and is timed with) its own worker.
            # The MCP server starts through hooks/launch.sh: "MCP only" drops hooks.json, not the folder.
            for name, drop in (("hooks only", ".mcp.json"), ("MCP only", "hooks/hooks.json")):
                home = ClaudeHome(base / name.replace(" ", "-"), fake.base_url, developer_python=sys.executable)
                source = without(copy_plugin(base / f"clone-{name.replace(' ', '-')}"), drop)
                home.install_plugin(source)
                if drop != ".mcp.json":
                    sources[name] = source
                order.append((name, home))
            for name, build in (("idle hooks", idle_hooks), ("idle MCP", idle_mcp_server)):
                home = ClaudeHome(base / name.replace(" ", "-"), fake.base_url, developer_python=None)
                home.install_plugin(build(manifest_only(base / f"plugin-{name.replace(' ', '-')}")))
                order.append((name, home))
        for _, home in order:
            if not args.proxy:
                home.env["ENABLE_TOOL_SEARCH"] = "true"
        try:
            for _, home in reversed(order):  # the worker starts and loads the MCP server; node's caches warm
                home.run(RUN_MARKER)
            times: dict[str, list[float]] = {name: [] for name, _ in order}
            bridge = ProcessWatch(BRIDGE_SCRIPT)
            with bridge:
                for round_ in range(args.runs):
                    for name, home in order if round_ % 2 == 0 else reversed(order):
                        started = time.perf_counter()
                        home.run(RUN_MARKER)
                        times[name].append(time.perf_counter() - started)
            hooks = hook_times(plugin, base / "shim", args.hook_runs, RUN_MARKER)
            idle = dict(order).get("idle hooks")
            idle_times = idle_hook_times(idle, base / "idle-shim", args.hook_runs, RUN_MARKER) if idle else {}
            worker_rss = worker_rss_mb(plugin)
        finally:
            for _, home in order:
                stop_worker(home)
    report(times, hooks, bridge, worker_rss, proxy=args.proxy, idle_hooks=idle_times)
    # A variant whose MCP server never started would pass for a cheap one: say so.
    for name, home in order:
        if name in sources and not (bridge.seen_under(sources[name]) or bridge.seen_under(home.home)):
            print(f"  WARNING: no MCP bridge was seen in the {name!r} sessions: their figure is not the MCP server's")
    return 0


def without(plugin_root: Path, name: str) -> Path:
    """The plugin with one of its parts removed (`.mcp.json`: no MCP server; `hooks/hooks.json`: no hooks)."""
    part = plugin_root / name
    shutil.rmtree(part) if part.is_dir() else part.unlink()
    return plugin_root


IDLE_MCP_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {"tools": []} if message.get("method") == "tools/list" else {
        "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
        "capabilities": {"tools": {}}, "serverInfo": {"name": "idle", "version": "1"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def hook_name(event: str) -> str:
    """An event's hook script name: SessionStart -> session_start."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in event).lstrip("_")


def idle_hooks(plugin_root: Path) -> Path:
    """The plugin's hook events, each running a command that only reads its payload (naming its
    event, for the per-hook times: `IDLE_SHIM`)."""
    events = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    idle = {event: [{"hooks": [{"type": "command", "command": f"MA_HOOK={hook_name(event)} cat > /dev/null", "timeout": 10}]}]
            for event in events}  # fmt: skip
    (plugin_root / "hooks").mkdir()
    (plugin_root / "hooks" / "hooks.json").write_text(json.dumps({"hooks": idle}))
    return plugin_root


def idle_mcp_server(plugin_root: Path) -> Path:
    """A stdio MCP server with no tools, started as the plugin's bridge is (`python3 -S`)."""
    (plugin_root / "idle_server.py").write_text(IDLE_MCP_SERVER)
    config = {"mcpServers": {"idle": {"command": "python3", "args": ["-S", "${CLAUDE_PLUGIN_ROOT}/idle_server.py"]}}}
    (plugin_root / ".mcp.json").write_text(json.dumps(config))
    return plugin_root


def manifest_only(target: Path) -> Path:
    """A plugin with nothing but its manifests (same names), to measure Claude Code's cost of any plugin."""
    from tests.e2e.harness import copy_plugin

    copy_plugin(target)
    for path in target.iterdir():
        if path.name != ".claude-plugin":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return target


def report(times: dict[str, list[float]], hooks: dict[str, list[float]], bridge: ProcessWatch,
           worker_rss: float | None, *, proxy: bool, idle_hooks: dict[str, list[float]] | None = None) -> None:  # fmt: skip
    without, with_ = statistics.median(times["without"]), statistics.median(times["with"])
    ratio = with_ / without
    print(f"one-prompt `claude -p` sessions, {len(times['with'])} of each, interleaved; "
          + ("tool search off (as behind a proxy: Claude Code waits for MCP servers before the first request)"
             if proxy else "tool search on (as with Anthropic's API: MCP tools deferred)"))  # fmt: skip
    for name, label in (("without", "without plugin"), ("empty", "empty plugin"), ("with", "with plugin")):
        runs = ", ".join(f"{v:.2f}" for v in times[name])
        print(f"  {label:15} median {statistics.median(times[name]):.2f} s   (runs: {runs})")
    verdict = "ok" if ratio <= TARGETS["ratio"] else "over target"
    print(f"  ratio           {ratio:.2f}   (target <= {TARGETS['ratio']}: {verdict}; "
          f"{with_ - without:+.2f} s per session)")  # fmt: skip
    paired = statistics.median(w - o for w, o in zip(times["with"], times["without"]))
    print(f"  paired          {paired:+.2f} s per session   (median of each round's difference: steadier on a busy machine)")
    floor = statistics.median(e - o for e, o in zip(times["empty"], times["without"]))
    print(f"  floor           {floor:+.2f} s per session   (Claude Code's own cost of an installed plugin, paired; "
          f"Memory Anchor's share: {paired - floor:+.2f} s)")  # fmt: skip
    for part in ("hooks only", "idle hooks", "MCP only", "idle MCP"):
        if part in times:
            share = statistics.median(p - e for p, e in zip(times[part], times["empty"]))
            print(f"  {part:15} median {statistics.median(times[part]):.2f} s   "
                  f"({share:+.2f} s over the empty plugin, paired)")  # fmt: skip
    if "hooks only" in times and "MCP only" in times:
        # Memory Anchor's share split in two, each over a plugin of the same shape: ours minus idle, paired.
        hooks_share = statistics.median(o - i for o, i in zip(times["hooks only"], times["idle hooks"]))
        mcp_share = statistics.median(o - i for o, i in zip(times["MCP only"], times["idle MCP"]))
        shape = statistics.median(o - i - e + w for o, i, e, w in zip(times["with"], times["idle hooks"], times["idle MCP"],
                                                                    times["without"]))  # fmt: skip
        print(f"  our share       {shape:+.2f} s over a same-shape idle plugin, paired (the whole plugin minus the idle "
              f"hooks' and idle MCP server's costs over bare): hooks {hooks_share:+.2f} s, MCP server {mcp_share:+.2f} s")  # fmt: skip
    if bridge.peak_kb:
        mb = bridge.peak_kb / 1024
        verdict = "ok" if mb <= TARGETS["bridge_rss_mb"] else "over target"
        print(f"  bridge RSS      {mb:.1f} MB peak over {bridge.seen} sessions   "
              f"(target <= {TARGETS['bridge_rss_mb']} MB: {verdict})")  # fmt: skip
    else:
        print("  bridge RSS      not measured (no bridge process seen; /proc needed)")
    if worker_rss is not None:
        print(f"  worker RSS      {worker_rss:.0f} MB (shared by every session)")
    if hooks:
        count = max(len(v) for v in hooks.values())
        print(f"hook wall time inside a session (median of {count} sessions, interpreter start included)")
        total = 0.0
        for name in HOOKS:
            values = hooks.get(name)
            if values:
                total += statistics.median(values)
                print(f"  {name:19} {statistics.median(values) * 1000:6.0f} ms   (max {max(values) * 1000:.0f} ms)")
        print(f"  {'sum':19} {total * 1000:6.0f} ms")
    if hooks and idle_hooks:
        print("each hook's own share: its wall time minus the idle plugin's `cat` for the same event (medians)")
        total = 0.0
        for name in HOOKS:
            ours, idle = hooks.get(name), idle_hooks.get(name)
            if ours and idle:
                share = statistics.median(ours) - statistics.median(idle)
                total += share
                print(f"  {name:19} {share * 1000:+6.0f} ms   (cat {statistics.median(idle) * 1000:.0f} ms)")
        print(f"  {'sum':19} {total * 1000:+6.0f} ms")


class ProcessWatch:
    """Samples /proc while sessions run: the peak RSS of every process whose command line names `needle`."""

    def __init__(self, needle: str):
        self.needle = needle.encode()
        self.peak_kb = 0
        self.pids: set[int] = set()
        self.command_lines: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    @property
    def seen(self) -> int:
        return len(self.pids)

    def __enter__(self) -> ProcessWatch:
        if Path("/proc/self/status").exists():
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = Path(entry.path, "cmdline").read_bytes()
                    if self.needle not in cmdline:
                        continue
                    status = Path(entry.path, "status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):  # the process's peak RSS so far
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
                        if int(entry.name) not in self.pids:
                            self.pids.add(int(entry.name))
                            self.command_lines.append(cmdline)

    def seen_under(self, root: Path) -> int:
        """How many of the processes seen ran from under `root` (a plugin's copy)."""
        return sum(str(root).encode() + b"/" in cmdline for cmdline in self.command_lines)


def hook_times(home, shim_dir: Path, runs: int, prompt: str) -> dict[str, list[float]]:
    """Each hook's wall time over `runs` sessions, measured by a `python3` shim first on PATH."""
    if runs <= 0 or os.name != "posix":
        return {}
    python = shutil.which("python3", path=home.env["PATH"])
    if python is None:
        return {}
    # hooks/launch.sh starts the interpreter the hooks remembered, not PATH's python3: name the shim there.
    remembered = home.plugin_data() / "hook-python"
    before = remembered.read_bytes() if remembered.exists() else None
    remembered.write_text(f"{shim_dir / 'python3'}\n")
    try:
        times = _shimmed_times(home, shim_dir, "python3", SHIM.replace("{python}", python), runs, prompt)
    finally:
        remembered.write_bytes(before) if before is not None else remembered.unlink()
    # hooks/hook.py's argument names the event (SessionStart): the figures name it session_start.
    return {"".join(f"_{c.lower()}" if c.isupper() else c for c in event).lstrip("_"): took for event, took in times.items()}


def idle_hook_times(home, shim_dir: Path, runs: int, prompt: str) -> dict[str, list[float]]:
    """The idle plugin's `cat` hooks' wall times over `runs` sessions, by a `cat` shim first on PATH."""
    cat = shutil.which("cat", path=home.env["PATH"]) if runs > 0 and os.name == "posix" else None
    if cat is None:
        return {}
    return _shimmed_times(home, shim_dir, "cat", IDLE_SHIM.replace("{cat}", cat), runs, prompt)


def _shimmed_times(home, shim_dir: Path, command: str, script: str, runs: int, prompt: str) -> dict[str, list[float]]:
    """Run `runs` sessions with `script` first on PATH as `command`; the wall times it logged, by name."""
    shim_dir.mkdir(parents=True)
    log = shim_dir / "hooks.log"
    shim = shim_dir / command
    shim.write_text(script.replace("{log}", str(log)))
    shim.chmod(0o755)
    env = dict(home.env)
    home.env["PATH"] = f"{shim_dir}{os.pathsep}{env['PATH']}"
    try:
        for _ in range(runs):
            home.run(prompt)
    finally:
        home.env = env
    times: dict[str, list[float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        name, start, end = line.split()
        times.setdefault(name, []).append((int(end) - int(start)) / 1e9)
    return times


def worker_rss_mb(home) -> float | None:
    from memory_anchor.client.worker_client import WorkerClient

    try:
        info = WorkerClient(home.plugin_data(), autostart=False).info()
        for line in Path(f"/proc/{info.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except Exception:  # noqa: BLE001 - a figure we cannot read is left out, not a failed bench
        return None
    return None


def stop_worker(home) -> None:
    from memory_anchor.core import lifecycle

    for data in (home.home / ".claude" / "plugins" / "data").glob("*"):
        lifecycle.stop(data)
