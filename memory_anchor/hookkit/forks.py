"""Which session a Claude Code fork (`--fork-session`) came from, read by its SessionStart hook.

No hook payload names a fork's parent (recorded with 2.1.197 and 2.1.332,
tests/fixtures/forks), and the fork's transcript does not exist yet when its
first hooks run. What the SessionStart hook does have:

- **2.1.197:** the payload is the *parent's* (its `session_id`, `source:
  "resume"`); the fork's own id first shows on its first prompt. The hook's
  `CLAUDE_ENV_FILE` (`.../session-env/<session id>/sessionstart-hook-N.sh`)
  already names the fork, but a `--continue` names a fresh id there too (one
  its events never carry), so the `claude` process's command line decides:
  a fork's holds `--fork-session`.
- **2.1.332:** the payload is the fork's (`source: "fork"`). `CLAUDE_PID` is
  the `claude` process, whose command line holds `--resume <parent>
  --fork-session` (an interactive fork does not; the worker then branches the
  fork from the default branch).

Standard library only, and only a resumed or forked SessionStart asks: the
answer costs a few /proc reads (`ps` where there is no /proc).
"""

from __future__ import annotations

import os

ENV_FILE = "CLAUDE_ENV_FILE"
CLAUDE_PID = "CLAUDE_PID"
FORK_FLAG = "--fork-session"
RESUME_FLAGS = ("--resume", "-r")


def fork_of(payload: dict, environ: dict, read_command_line=None) -> tuple[str, str] | None:
    """(the fork's session id, its parent's) when this SessionStart opens a fork, else None.

    `read_command_line(environ)` gives the `claude` process's arguments (default:
    `claude_command_line`, which reads the live process; tests give recorded ones).
    """
    claude_argv = read_command_line or claude_command_line
    if payload.get("hook_event_name", "SessionStart") != "SessionStart":
        return None
    session_id, source = payload.get("session_id"), payload.get("source")
    if not isinstance(session_id, str) or not session_id:
        return None
    if source == "resume":  # 2.1.197: the parent's payload, the fork's environment
        own = env_file_session(environ.get(ENV_FILE, ""))
        if own and own != session_id and FORK_FLAG in claude_argv(environ):
            return own, session_id
        return None
    if source == "fork":  # 2.1.214+: the fork's payload, the parent on the command line
        parent = resumed_session(claude_argv(environ))
        return (session_id, parent) if parent and parent != session_id else None
    return None


def carrying_link(payload: dict, fork: str, parent: str) -> dict:
    """This SessionStart's payload as the fork's own, naming its parent: what the hook sends (or
    spools) when the worker could not be told of the fork. The worker's fork rule reads
    `parent_session_id` from a resumed or forked SessionStart (memory_anchor/worker/branching/sessions.py);
    2.1.197's payload is the parent's, so its `session_id` becomes the fork's (the parent's
    is the one in `parent_session_id`)."""
    return {**payload, "session_id": fork, "parent_session_id": parent}


def claude_command_line(environ: dict, levels: int = 6) -> list[str]:
    """The `claude` process's arguments: `CLAUDE_PID`'s (2.1.214+), else the first of this
    hook's ancestors with `--fork-session` (2.1.197 runs a hook under a shell or two)."""
    pid = environ.get(CLAUDE_PID, "")
    if pid.isdigit():
        return command_line(pid)
    pid = str(os.getppid())
    for _ in range(levels):
        argv = command_line(pid)
        if FORK_FLAG in argv:
            return argv
        pid = parent_pid(pid)
        if pid in ("", "0", "1"):
            break
    return []


def env_file_session(path: str) -> str | None:
    """The session id in `.../session-env/<session id>/<file>`, or None."""
    parts = path.replace("\\", "/").split("/")
    if len(parts) >= 3 and parts[-3] == "session-env" and parts[-2]:
        return parts[-2]
    return None


def resumed_session(argv: list[str]) -> str | None:
    """The session `claude ... --resume <id> --fork-session` forks, or None."""
    if FORK_FLAG not in argv:
        return None
    for i, arg in enumerate(argv):
        if arg in RESUME_FLAGS and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            return argv[i + 1]
        if arg.startswith("--resume="):
            return arg.split("=", 1)[1] or None
    return None


def parent_pid(pid: str) -> str:
    """Process `pid`'s parent ("" when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # pid (comm) state ppid ...: the name may hold spaces and parentheses, so split after the last ')'.
            return handle.read().rsplit(b")", 1)[1].split()[1].decode()
    except (OSError, IndexError):
        pass
    import subprocess  # only where there is no /proc: on every SessionStart's path it cost more than the interpreter's start

    try:
        done = subprocess.run(["ps", "-o", "ppid=", "-p", pid], capture_output=True, timeout=2.0)
        return done.stdout.decode("ascii", "replace").strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def command_line(pid: str) -> list[str]:
    """The arguments of process `pid` (/proc, else `ps`); [] when they cannot be read."""
    if not pid.isdigit():
        return []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode("utf-8", "replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        pass
    import subprocess

    try:  # macOS and the BSDs: no /proc; a session id holds no spaces, so splitting is enough
        done = subprocess.run(["ps", "-o", "command=", "-p", pid], capture_output=True, timeout=2.0)
        return done.stdout.decode("utf-8", "replace").split()
    except (OSError, subprocess.SubprocessError):
        return []
