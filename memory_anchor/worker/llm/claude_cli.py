"""Claude through the user's own Claude Code login: the `claude` CLI in headless mode.

Most Claude Code users have no `ANTHROPIC_API_KEY`; they are logged in with a
subscription (OAuth), an `apiKeyHelper`, Bedrock or Vertex. `claude -p` uses
whatever login the user has, so the worker distils through it:

    claude -p --system-prompt <ours> --tools "" --strict-mcp-config
           --no-session-persistence --settings '{"disableAllHooks": true}'
           --output-format json --model <llm_model>        (the prompt on stdin)

The spawned session is a plain completion, not an agent:

- no tools, no MCP servers (ours included), no hooks (ours included), no
  CLAUDE.md, no thinking, no auto-memory; our short system prompt instead of
  Claude Code's (a request is ~1.5 KB of overhead, not ~76 KB);
- nothing in the user's session history (`--no-session-persistence`);
- `MEMORY_ANCHOR_SPAWNED=1` in its environment, which our hooks check first
  (memory_anchor/hookkit/entry.py): a second guard should a Claude Code
  version ever ignore `disableAllHooks`;
- Claude Code's own retries are off (`CLAUDE_CODE_MAX_RETRIES=0`): the
  worker's retry policy (memory_anchor/worker/llm/client.py) is the only one, as on the SDK path;
- one call at a time per worker (a lock), under a hard timeout that kills the
  whole process group.

`--bare` is not an option: it ignores OAuth logins. Neither is
`--setting-sources ""`: it loses an `apiKeyHelper` login.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_anchor.hookkit.entry import SPAWNED_ENV
from memory_anchor.worker.llm.completion import Completion

# Seconds a `claude` process may take to start and load the login, on top of the
# call's own timeout (it starts in ~1 s; a cold disk or a slow apiKeyHelper is slower).
STARTUP_ALLOWANCE_SECONDS = 15.0
PROBE_TIMEOUT_SECONDS = 20.0
RETRYABLE_STATUSES = (408, 409, 429)

# What makes the child a bare completion (see the module docstring).
CHILD_ENV = {
    SPAWNED_ENV: "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "CLAUDE_CODE_DISABLE_THINKING": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
}
# Variables Claude Code sets for the hooks of the session that started the worker:
# they describe that session, not the one we spawn.
SESSION_ENV = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_PLUGIN_ROOT",
    "CLAUDE_PLUGIN_DATA",
    "CLAUDE_PROJECT_DIR",
    "CLAUDE_ENV_FILE",
)
NO_HOOKS_SETTINGS = json.dumps({"disableAllHooks": True})

# One `claude` process at a time, whatever thread asks (pipeline, judge, extraction).
_CALL_LOCK = threading.Lock()


class CliCallError(Exception):
    """A `claude -p` call that gave no answer. `status`: the API's HTTP status, when there was one."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None, logged_out: bool = False):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.logged_out = logged_out


@dataclass(frozen=True)
class CliStatus:
    """What we know of the user's Claude Code: where it is, its version, its login."""

    path: str
    found_via: str  # "the claude_cli_path setting" | "PATH" | "Claude Code's install place"
    version: str | None = None
    logged_in: bool | None = None  # None: the CLI could not tell (older versions)
    auth: str | None = None  # "claude.ai", "api_key_helper", "bedrock", ...
    problem: str | None = None  # why it cannot be used, when it cannot

    @property
    def usable(self) -> bool:
        return self.problem is None and self.logged_in is not False

    def describe(self) -> str:
        """`Claude Code CLI 2.1.197 at /path (PATH), logged in via claude.ai`."""
        version = f" {self.version}" if self.version else ""
        text = f"Claude Code CLI{version} at {self.path} ({self.found_via})"
        if self.problem:
            return f"{text}: {self.problem}"
        if self.logged_in is None:
            return f"{text}, login not checked"
        if not self.logged_in:
            return f"{text}, not logged in (run `claude` and /login)"
        return f"{text}, logged in via {self.auth or 'an unknown method'}"


# --- finding the CLI ---------------------------------------------------------------


def install_places(home: Path | None = None, env: dict[str, str] | None = None) -> list[Path]:
    """Where Claude Code's installers put `claude`, besides PATH (a worker started by
    a service manager or `make run` may have a PATH without them)."""
    env = os.environ if env is None else env
    home = home or Path.home()
    places = [
        home / ".local" / "bin" / "claude",  # the native installer
        home / ".claude" / "local" / "claude",  # the older "local" install
        home / ".claude" / "local" / "node_modules" / ".bin" / "claude",
    ]
    prefix = env.get("NPM_CONFIG_PREFIX") or env.get("npm_config_prefix")
    if prefix:
        places.append(Path(prefix) / "bin" / "claude")
    places += [
        home / ".npm-global" / "bin" / "claude",
        home / ".volta" / "bin" / "claude",
        home / ".bun" / "bin" / "claude",
        *sorted((home / ".nvm" / "versions" / "node").glob("*/bin/claude"), reverse=True),
        Path("/opt/homebrew/bin/claude"),
        Path("/usr/local/bin/claude"),
        Path("/usr/bin/claude"),
    ]
    if os.name == "nt":
        appdata = env.get("APPDATA")
        if appdata:
            places.append(Path(appdata) / "npm" / "claude.cmd")
        places.append(home / ".local" / "bin" / "claude.exe")
    return places


def locate(configured: str = "", *, env: dict[str, str] | None = None) -> tuple[str, str] | None:
    """(path, how it was found) of the `claude` to use, or None.

    A configured path wins and is not second-guessed (a wrong one is reported,
    not replaced by another binary the user did not choose).
    """
    env = os.environ if env is None else env
    if configured.strip():
        path = Path(configured.strip()).expanduser()
        return str(path), "the claude_cli_path setting"
    on_path = shutil.which("claude", path=env.get("PATH"))
    if on_path:
        return on_path, "PATH"
    home = Path(env["HOME"]) if env.get("HOME") else None
    for place in install_places(home, env):
        if place.is_file() and os.access(place, os.X_OK):
            return str(place), "Claude Code's install place"
    return None


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a spawned `claude`: the worker's, minus the parent session's, plus our guards."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in SESSION_ENV}
    env.update(CHILD_ENV)
    return env


def inspect(path: str, found_via: str, *, env: dict[str, str] | None = None) -> CliStatus:
    """Version and login of the CLI at `path` (`claude --version`, `claude auth status --json`)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return CliStatus(path, found_via, problem="no executable there")
    environment = child_env(env)
    try:
        version_run = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS, env=environment,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CliStatus(path, found_via, problem=f"`claude --version` failed: {exc}")
    if version_run.returncode != 0:
        tail = (version_run.stderr or version_run.stdout).strip()[-200:]
        return CliStatus(path, found_via, problem=f"`claude --version` exited {version_run.returncode}: {tail}")
    version = (version_run.stdout.split() or [None])[0]
    try:
        auth_run = subprocess.run(
            [path, "auth", "status", "--json"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS,
            env=environment, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        status = json.loads(auth_run.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return CliStatus(path, found_via, version=version)  # an older CLI: the first call will tell
    if not isinstance(status, dict) or "loggedIn" not in status:
        return CliStatus(path, found_via, version=version)
    provider = status.get("apiProvider")
    auth = status.get("authMethod") if provider in (None, "firstParty") else provider
    return CliStatus(path, found_via, version=version, logged_in=bool(status["loggedIn"]), auth=auth)


def find(configured: str = "", *, env: dict[str, str] | None = None) -> CliStatus | None:
    """The user's Claude Code CLI and its login, or None when there is none to be found."""
    found = locate(configured, env=env)
    return inspect(*found, env=env) if found else None


# --- one call ---------------------------------------------------------------------


def complete(
    path: str, system: str, prompt: str, *, model: str, max_tokens: int, timeout: float,
    env: dict[str, str] | None = None,
) -> Completion:  # fmt: skip
    """One completion through `claude -p`; raises CliCallError. Waits for any call already running."""
    budget = timeout + STARTUP_ALLOWANCE_SECONDS
    if not _CALL_LOCK.acquire(timeout=budget):
        raise CliCallError(f"another Claude Code call has been running for over {budget:.0f}s", retryable=True)
    try:
        return _run(path, system, prompt, model=model, max_tokens=max_tokens, timeout=budget, env=env)
    finally:
        _CALL_LOCK.release()


def command(path: str, system: str, model: str) -> list[str]:
    return [
        path, "-p",
        "--system-prompt", system,
        "--tools", "",
        "--strict-mcp-config",
        "--no-session-persistence",
        "--settings", NO_HOOKS_SETTINGS,
        "--output-format", "json",
        "--model", model,
    ]  # fmt: skip


def _run(
    path: str, system: str, prompt: str, *, model: str, max_tokens: int, timeout: float, env: dict[str, str] | None
) -> Completion:
    environment = child_env(env)
    environment["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_tokens)
    # A neutral working directory: the child must not pick up a project's settings.
    workdir = tempfile.gettempdir()
    try:
        process = subprocess.Popen(
            command(path, system, model), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=environment, cwd=workdir, start_new_session=os.name == "posix",
        )  # fmt: skip
    except OSError as exc:
        raise CliCallError(f"cannot run {path}: {exc}", retryable=False) from exc
    try:
        stdout, stderr = process.communicate(prompt.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        process.communicate()
        raise CliCallError(f"timed out after {timeout:.0f}s (claude -p killed)", retryable=True) from None
    return parse_result(stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), process.returncode, model)


def _kill_group(process: subprocess.Popen) -> None:
    """Kill `claude` and anything it started (an apiKeyHelper, a stuck child)."""
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def parse_result(stdout: str, stderr: str, returncode: int | None, requested_model: str = "") -> Completion:
    """The reply in `--output-format json` output, or CliCallError saying what went wrong.

    The model is the one the CLI says answered, else the one asked for."""
    result = _last_json_object(stdout)
    if result is None:
        tail = (stderr.strip() or stdout.strip())[-300:] or "no output"
        raise CliCallError(f"claude -p exited {returncode} without a JSON result: {tail}", retryable=False)
    message = str(result.get("result") or "").strip()
    if result.get("is_error"):
        status = result.get("api_error_status")
        status = status if isinstance(status, int) else None
        lowered = message.lower()
        logged_out = "not logged in" in lowered or "/login" in lowered
        if status is not None:
            retryable = status in RETRYABLE_STATUSES or status >= 500
        else:
            retryable = not logged_out and any(
                word in lowered for word in ("unable to connect", "connection", "timed out", "timeout", "overloaded")
            )
        problem = f"HTTP {status}: {message}" if status else message or "an error without a message"
        raise CliCallError(problem[:500], retryable=retryable, status=status, logged_out=logged_out)
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    input_tokens = sum(
        int(usage.get(key) or 0) for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    models = result.get("modelUsage") if isinstance(result.get("modelUsage"), dict) else {}
    return Completion(
        text=str(result.get("result") or ""),
        input_tokens=input_tokens,
        output_tokens=int(usage.get("output_tokens") or 0),
        stop_reason=result.get("stop_reason"),
        model=next(iter(models), None) or requested_model,
    )


def _last_json_object(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("type") == "result":
            return value
    return None
