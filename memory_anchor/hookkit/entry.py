"""What every hook script calls: read the event, let Claude Code go on unless it waits for output, run it.

Claude Code waits for each hook process to exit before it goes on. SessionStart and
UserPromptSubmit print the context it waits for; every other event only has to be
delivered. For those the process forks: the parent exits as soon as it has read the
payload, and Claude Code goes on, while the child, detached from the session (a
session of its own, stdio on /dev/null), delivers the event to the worker or spools
it, starting a worker if need be (runner.py). The imports of the kit, the round trip
to the worker and any worker start leave the session's path: for PostToolUse that was
as much again as the interpreter's own start, on every tool use.

This module imports only `os` and `sys`, and the rest of the kit after the fork:
whatever the parent imports, the session waits for.

Order: a detached delivery takes a few milliseconds, while Claude Code's next event
comes after a model request or, at the end of a session, after the MCP server's
shutdown (50 ms or more). Were a Stop still to arrive before the tool use it follows,
the next Stop or SessionEnd rewrites the session's summary with everything.

MEMORY_ANCHOR_HOOKS_FOREGROUND=1 delivers before exiting, as all events did before:
for debugging, and for tests that look at the delivery right after the hook returns.
Where there is no fork (Windows), delivery is always in the foreground.
"""

from __future__ import annotations  # fails on a Python too old for the kit, where the hook script says so

import os
import sys

# Events whose hook prints what Claude Code is waiting for: never detached.
PRINTING = ("SessionStart", "UserPromptSubmit")
FOREGROUND_ENV = "MEMORY_ANCHOR_HOOKS_FOREGROUND"
# Set on the Claude Code sessions the worker itself spawns to distil (memory_anchor/worker/llm/claude_cli.py).
# They run with hooks disabled; this guard holds even if a Claude Code version ignored that.
SPAWNED_ENV = "MEMORY_ANCHOR_SPAWNED"


def main(event: str) -> None:
    """Run the hook for `event`; returns normally whatever happens (the script then exits 0)."""
    if os.environ.get(SPAWNED_ENV):
        return  # our own distilling session: capturing it would feed the worker its own calls
    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError):  # no stdin at all: the runner logs the empty event
        raw = b""
    if event not in PRINTING:
        detach()
    from memory_anchor.hookkit import runner

    runner.run(event, raw)


def detach() -> None:
    """Go on in a child of a new session and end this process: Claude Code's wait ends here."""
    if os.environ.get(FOREGROUND_ENV) or not hasattr(os, "fork"):
        return
    try:
        pid = os.fork()
    except OSError:  # no process to spare: deliver in the foreground
        return
    if pid:
        os._exit(0)
    try:
        os.setsid()  # out of the hook's process group, which Claude Code may kill on a timeout
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # Claude Code reads the hook's pipes; the child holds none of them
            os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
