"""What the human-only commands (identity, approvals, conflicts) share: who the
human is, the triple confirmation (a change to identity is a person's deliberate act), and refusing to run inside
an agent's shell.

Claude Code sets `CLAUDECODE=1` in the environment of every command its agent
runs, so a command that finds it knows an agent (not the user's own terminal)
is calling, and refuses: an agent changes the identity layer only by proposing.
"""

from __future__ import annotations

import getpass
import os
import sys

from memory_anchor.client.worker_client import WorkerError

PROMPTS = (
    "Confirmation 1/3: do you really want to {action} the identity layer? (y/n) ",
    "Confirmation 2/3: please confirm again; this changes what every agent is always told (y/n) ",
    "Confirmation 3/3: final confirmation; this is not lightly undone (y/n) ",
)


def human_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name (containers): still a human at a terminal
        return "human"


def refuse_inside_agent(command: str, instead: str = "Agents propose identity changes with the propose_identity_change tool",
                        code: str = "identity_protected") -> None:  # fmt: skip
    if os.environ.get("CLAUDECODE") == "1":
        raise WorkerError(
            f"`memory-anchor {command}` is for humans and refuses to run inside a Claude Code session "
            f"(CLAUDECODE=1). {instead}; run this command in your own terminal.",
            code=code,
        )


def confirm_three_times(action: str, yes: bool) -> int:
    """3 when the human confirmed three times (or passed --yes); raises otherwise."""
    if yes:
        print("--yes: the three confirmations are skipped (you confirm them by passing --yes)", file=sys.stderr)
        return 3
    if not sys.stdin.isatty():
        raise WorkerError("identity changes need three confirmations at a terminal; in a script pass --yes", code="confirmation_required")
    for prompt in PROMPTS:
        answer = input(prompt.format(action=action)).strip().lower()
        if answer not in ("y", "yes"):
            raise WorkerError("cancelled: nothing was changed", code="cancelled")
    return 3
