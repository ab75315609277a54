"""Driving the real Claude Code CLI against the fake Messages API, with the plugin installed the user's way.

- `ClaudeHome`: a temporary HOME; `install_plugin()` runs `claude plugin
  marketplace add <plugin copy>` + `claude plugin install memory-anchor@memory-anchor`;
  `run()` is one `claude -p` session, `session()` a multi-prompt stream-json one.
- `ScriptedModel`: the fake API's responder. It decides each reply from the
  conversation, as docs/claude-code-e2e.md describes: run a marker command,
  search memory through the MCP tools, summarise for /compact.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_server import (
    last_user_prompt,
    request_text,
    text_reply,
    tool_use_reply,
    trailing_tool_results,
)

E2E = Path(__file__).resolve().parent
ROOT = E2E.parents[1]
# The two pinned Claude Code CLIs (tests/e2e/cli/<pin>/package.json, `make e2e-deps`): the oldest
# the plugin supports (memory_anchor/core/claude_code.py) and the newest release (`make bump-claude-code`).
PINS = ("oldest", "newest")
CLAUDE = E2E / "cli" / "newest" / "node_modules" / ".bin" / "claude"  # what users run today
# What a user's clone of the repository holds (no venv, no node_modules, no tests).
PLUGIN_FILES = [".claude-plugin", ".mcp.json", "hooks", "memory_anchor", "skills",
                 "pyproject.toml", "README.md"]  # fmt: skip
MARKETPLACE = "memory-anchor"
PLUGIN = "memory-anchor"
MCP_PREFIX = "mcp__plugin_memory-anchor_memory__"

RUN_MARKER = "run the marker command"
SEARCH_MEMORY = "search memory for the marker"
DELEGATE_MARKER = "have a subagent run the marker command"
BACKGROUND_STEP = "check the background subagent's marker output"


@dataclass(frozen=True)
class ClaudeCli:
    """One pinned Claude Code CLI: which pin, its binary and the version package.json pins."""

    pin: str
    path: Path
    version: str

    def __str__(self) -> str:
        return f"Claude Code {self.version} ({self.pin})"


def pinned_cli(pin: str) -> ClaudeCli:
    """The pin's CLI as package.json names it (installed or not)."""
    folder = E2E / "cli" / pin
    version = json.loads((folder / "package.json").read_text())["dependencies"]["@anthropic-ai/claude-code"]
    return ClaudeCli(pin, folder / "node_modules" / ".bin" / "claude", version)


def ensure_claude_installed(pin: str = "newest") -> Path:
    """`npm ci` the pinned Claude Code into tests/e2e/cli/<pin>/node_modules unless it is there.

    Under pytest-xdist several processes may ask at once: they take turns on a lock held on the
    pin's package.json (a file that is always there, so the lock writes nothing), and the second
    finds the CLI the first installed instead of running `npm ci` over it.
    """
    cli = pinned_cli(pin)
    folder = cli.path.parents[2]
    if cli.path.exists():
        return cli.path
    with open(folder / "package.json", "rb") as manifest:
        fcntl.flock(manifest, fcntl.LOCK_EX)
        if not cli.path.exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder, check=True,
                           timeout=600)  # fmt: skip
    return cli.path


def copy_plugin(target: Path) -> Path:
    """The plugin as a user's clone has it."""
    target.mkdir(parents=True)
    for name in PLUGIN_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.exists():
            shutil.copy2(source, target / name)
    return target


class ScriptedModel:
    """Replies like a model following a script; `marker` is the distinctive output of session 1."""

    def __init__(self, marker: str):
        self.marker = marker

    def __call__(self, request: dict[str, Any]) -> Any:
        prompt = last_user_prompt(request)
        tools = {t.get("name") for t in request.get("tools") or []}
        after = trailing_tool_results(request)
        if "summary of the conversation" in prompt.lower():  # /compact
            return text_reply(f"Summary: the user asked to run the marker command; it printed {self.marker}.")
        if not tools:  # side requests (titles, topic checks): short text
            return text_reply("Marker session")
        if DELEGATE_MARKER in prompt:  # the subagent's own requests are asked to RUN_MARKER, below
            # Once: the background agent's notification (2.1.332) comes as a turn without a tool result.
            if last_tool_use(request) not in ("Agent", "Task"):
                agent = "Agent" if "Agent" in tools else "Task"
                return tool_use_reply(agent, {"description": "Run the marker command", "subagent_type": "general-purpose",
                                              "prompt": f"Please {RUN_MARKER}."})  # fmt: skip
            if "Async agent launched" in last_tool_result(request) and "<task-notification>" not in request_text(request):
                # 2.1.332's first Stop, while the agent works: a step that its end makes moot.
                return text_reply(f"Next step: {BACKGROUND_STEP}.")
            return text_reply("Done: the subagent printed the marker.")
        if RUN_MARKER in prompt:
            if after == 0:
                return tool_use_reply("Bash", {"command": f"echo {self.marker}", "description": "Print the marker"})
            return text_reply("The marker command ran.")
        if SEARCH_MEMORY in prompt:
            last = last_tool_use(request) if after else None
            if last in (None, "Bash", "ToolSearch"):
                if MCP_PREFIX + "search" not in tools and last != "ToolSearch":
                    if MCP_PREFIX + "search" in offered_tools(request):
                        # Deferred (2.1.332): the model loads an MCP tool's schema before calling it.
                        return tool_use_reply("ToolSearch", {"query": f"select:{MCP_PREFIX}search,{MCP_PREFIX}get_observations"})
                    # Claude Code `-p` may send the first request before MCP servers have connected
                    # (a worker that is still starting); a model can only wait for the tool.
                    return tool_use_reply("Bash", {"command": "sleep 1", "description": "Wait for tools"})
                return tool_use_reply(MCP_PREFIX + "search", {"query": f"echo {self.marker}", "limit": 5})
            if last == MCP_PREFIX + "search":
                ids = re.findall(r"^- (\S+) \| [^|]* \| observation", last_tool_result(request), re.MULTILINE)
                return tool_use_reply(MCP_PREFIX + "get_observations", {"ids": ids[:1] or ["none"]})
            return text_reply("Found it in memory.")
        return text_reply("OK.")


def offered_tools(request: dict[str, Any]) -> set[str]:
    """The tools a request offers the model: those it lists, and (2.1.332) the MCP tools it names as
    deferred, which the model loads with ToolSearch before calling them."""
    listed = {t.get("name") for t in request.get("tools") or []}
    deferred = set(re.findall(r"mcp__[\w-]+", request_text(request))) if "ToolSearch" in listed else set()
    return listed | deferred


def last_tool_use(request: dict[str, Any]) -> str | None:
    """Name of the tool the assistant called last."""
    for message in reversed(request.get("messages") or []):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for block in reversed(content):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    return block.get("name")
    return None


def last_tool_result(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages") or []):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, list):
                        return "\n".join(b.get("text", "") for b in inner if isinstance(b, dict))
                    return str(inner)
    return ""


class ClaudeHome:
    """A user's machine, as far as Claude Code can tell: HOME, a project dir, the environment."""

    def __init__(self, base: Path, api_url: str, *, developer_python: str | None, claude: Path = CLAUDE):
        self.claude_path = claude
        self.home = base / "home"
        self.project = base / "project"
        self.home.mkdir(parents=True)
        self.project.mkdir(parents=True)
        self.env = {
            # Only a bare python3 and node on PATH, as on a user's machine.
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": api_url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
            # The worker inherits this through the hooks: distil locally, keep the fake API for Claude Code.
            "MEMORY_ANCHOR_LLM_DAILY_TOKEN_BUDGET": "0",
            **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
            # The bootstrap's pip may reuse this machine's wheel cache (HOME is a temp dir).
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
        }
        if developer_python:
            self.env["MEMORY_ANCHOR_PYTHON"] = developer_python

    def claude(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.claude_path), *args], cwd=self.project, env=self.env, input=input, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip

    def install_plugin(self, plugin_root: Path) -> None:
        for args in (("plugin", "marketplace", "add", str(plugin_root)),
                     ("plugin", "install", f"{PLUGIN}@{MARKETPLACE}")):  # fmt: skip
            result = self.claude(*args)
            assert result.returncode == 0, (args, result.stdout, result.stderr)

    def run(self, prompt: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
        result = self.claude("-p", "--dangerously-skip-permissions", *extra, prompt, timeout=timeout)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
        return result

    def session(self, prompts: list[str], timeout: float = 180, between=None) -> list[dict]:
        """One stream-json session: each prompt is sent after the previous one's result.

        `between(n)` runs after the n-th result, before the next prompt.
        """
        process = subprocess.Popen(
            [str(self.claude_path), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
             "--dangerously-skip-permissions"],
            cwd=self.project, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        results = []
        deadline = time.monotonic() + timeout
        try:
            for prompt in prompts:
                line = {"type": "user", "session_id": "", "parent_tool_use_id": None,
                        "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}}  # fmt: skip
                process.stdin.write(json.dumps(line) + "\n")
                process.stdin.flush()
                while time.monotonic() < deadline:
                    out = process.stdout.readline()
                    if not out:
                        raise AssertionError(f"claude exited early: {process.stderr.read()[-2000:]}")
                    message = json.loads(out)
                    if message.get("type") == "result":
                        results.append(message)
                        if between is not None:
                            between(len(results))
                        break
            process.stdin.close()
            process.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, process.stderr.read()[-2000:]
        return results

    def interactive_screen(self, until: str, timeout: float = 60) -> str:
        """Start an interactive `claude` in a terminal, as a user does, and return what it
        printed (escape codes removed) once `until` appears; the session is then closed.

        `claude -p` never shows a hook's `systemMessage`; the terminal UI does.
        """
        import pty
        import select
        import signal

        config = self.home / ".claude.json"  # skip first-run onboarding, the trust and API key prompts
        state = json.loads(config.read_text()) if config.exists() else {}
        state.update(hasCompletedOnboarding=True, theme="dark",
                     customApiKeyResponses={"approved": [self.env["ANTHROPIC_API_KEY"][-20:]], "rejected": []})  # fmt: skip
        state.setdefault("projects", {}).setdefault(str(self.project), {})["hasTrustDialogAccepted"] = True
        config.write_text(json.dumps(state))
        env = dict(self.env, TERM="xterm-256color", COLUMNS="250", LINES="50")
        pid, fd = pty.fork()
        if pid == 0:  # the child: become claude in the project directory
            os.chdir(self.project)
            os.execve(str(self.claude_path), [str(self.claude_path)], env)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))  # wide: long lines do not wrap
        raw = b""
        wanted = re.sub(r"\s", "", until)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.5)
                if ready:
                    try:
                        raw += os.read(fd, 65536)
                    except OSError:
                        break
                screen = _plain(raw)
                if wanted in re.sub(r"\s", "", screen):
                    return screen
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
        raise AssertionError(f"{until!r} did not appear within {timeout}s; the screen: {_plain(raw)[-3000:]}")

    def plugin_data(self) -> Path:
        """CLAUDE_PLUGIN_DATA of the installed plugin (Claude Code names the directory)."""
        candidates = sorted((self.home / ".claude" / "plugins" / "data").glob("*"))
        assert len(candidates) == 1, candidates
        return candidates[0]


@contextmanager
def machine_with_git_project(tmp_path: Path, responder: Any, files: dict[str, str], message: str):
    """A Claude Code home with the plugin installed, its API the fake one answered by `responder`
    (kept as `machine.api`), and a project that is a git repository holding `files` in one commit
    (`machine.repo`); the worker the hooks started is stopped before the fake API goes."""
    from tests.e2e.test_claude_code import stop_worker
    from tests.fakes.anthropic_server import FakeAnthropicServer
    from tests.gitrepo import GitRepo

    ensure_claude_installed()
    with FakeAnthropicServer(responder=responder) as api:
        machine = ClaudeHome(tmp_path, api.base_url, developer_python=sys.executable)
        machine.install_plugin(copy_plugin(tmp_path / "plugin"))
        machine.api = api
        machine.repo = GitRepo(machine.project)
        for path, text in files.items():
            machine.repo.write(path, text)
        machine.repo.commit(message)
        try:
            yield machine
        finally:
            stop_worker(machine)


def mac_like_path(bin_dir: Path) -> str:
    """A PATH as on many Macs: `python3` is 3.9 (pyenv's, standing in for the Command Line
    Tools'), a newer Python beside it as `python3.X` (this suite's), then the system's."""
    import glob
    import sys

    old = sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.9*" / "bin" / "python3.9")))
    newer = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    bin_dir.mkdir(parents=True)
    if old:
        (bin_dir / "python3").symlink_to(old[-1])
    (bin_dir / f"python{sys.version_info[0]}.{sys.version_info[1]}").symlink_to(newer)
    return f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"


def _plain(raw: bytes) -> str:
    """Terminal output without escape sequences; the UI positions words with them, so spaces go too."""
    text = re.sub(rb"\x1b\[[0-9;?>]*[a-zA-Z]|\x1b\][^\x07]*\x07|\x1b[()][AB0-9]|\x1b[=>]", b"", raw)
    return text.decode("utf-8", "replace")


def wait_for(predicate, timeout: float, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def claude_or_skip(pin: str = "newest") -> Path:
    """The pinned CLI; a test that needs it skips when it is not installed, except in CI (CI=true), where it must run."""
    import pytest

    cli = pinned_cli(pin)
    if cli.path.exists():
        return cli.path
    if os.environ.get("CI") == "true":
        return ensure_claude_installed(pin)
    pytest.skip(f"the pinned {cli} is not installed: run `make e2e-deps`")
