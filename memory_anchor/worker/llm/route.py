"""Which way the worker reaches Claude, and why: the `llm_route` setting decides.

- `auto` (default): `ANTHROPIC_API_KEY` (the `anthropic` SDK), else the user's
  Claude Code login (the `claude` CLI, memory_anchor/worker/llm/claude_cli.py), else local;
- `api`: the key only; `cli`: the Claude Code login only; `local`: never Claude.

A route that cannot be taken falls to `local`, and its reason says why, for
`memory-anchor settings` and `/api/v1/status`, e.g.
"cli: no ANTHROPIC_API_KEY; Claude Code CLI 2.1.197 at /usr/local/bin/claude (PATH), logged in via claude.ai".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.llm import claude_cli
from memory_anchor.worker.llm.claude_cli import CliStatus

API, CLI, LOCAL = "api", "cli", "local"


@dataclass(frozen=True)
class Route:
    name: str  # api | cli | local
    reason: str
    cli: CliStatus | None = None

    def describe(self) -> str:
        return f"{self.name}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"route": self.name, "reason": self.reason}
        if self.cli is not None:
            data["cli"] = {"path": self.cli.path, "version": self.cli.version, "auth": self.cli.auth}
        return data


def choose_route(
    settings: Settings,
    env: dict[str, str] | None = None,
    find_cli: Callable[[str], CliStatus | None] | None = None,
) -> Route:
    """The route to take now. `find_cli(configured_path)` looks for the CLI (run only when needed)."""
    env = os.environ if env is None else env
    find_cli = find_cli or (lambda configured: claude_cli.find(configured, env=env))
    has_key = bool(env.get("ANTHROPIC_API_KEY", "").strip())
    wanted = settings.llm_route

    if wanted == LOCAL:
        return Route(LOCAL, "llm_route is 'local' in the settings")
    if wanted == API:
        if has_key:
            return Route(API, "llm_route is 'api'; ANTHROPIC_API_KEY is set")
        return Route(LOCAL, "llm_route is 'api' but no ANTHROPIC_API_KEY is set")
    if wanted == "auto" and has_key:
        return Route(API, "ANTHROPIC_API_KEY is set")

    why = "llm_route is 'cli'" if wanted == CLI else "no ANTHROPIC_API_KEY"
    cli = find_cli(settings.claude_cli_path)
    if cli is None:
        return Route(LOCAL, f"{why}, and no Claude Code CLI was found (PATH, Claude Code's install places)")
    if not cli.usable:
        return Route(LOCAL, f"{why}; {cli.describe()}", cli)
    return Route(CLI, f"{why}; {cli.describe()}", cli)
