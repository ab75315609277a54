"""Who started a captured event: a person's prompt or Claude Code's, a tool of ours or not.

Standard library only (the UserPromptSubmit hook asks before it recalls); the
worker asks the same through memory_anchor/schemas/events.py.

What Claude Code sends, as recorded from the real CLI (tests/fixtures/hook_payloads/
and tests/fixtures/transcripts/):
- UserPromptSubmit's `source` is declared in 2.1.332's hook schema (`user`, `sdk`,
  `system`, `loop_wakeup`, `schedule_wakeup`, `poll_event`, "may be omitted while
  the field rolls out") but the build leaves it out of every payload, `claude -p`
  and stream-json alike. So it is read when present, and a prompt without it is
  judged by its text: a finished background agent's `<task-notification>` comes as
  a UserPromptSubmit of its own (its transcript line says `promptSource: "system"`).
- `sdk` is what the schema names `claude -p` and the Agent SDK, and what the
  transcript of every prompt of a `claude -p` session says (`promptSource: "sdk"`).
  A person typing `claude -p "fix the build"` is asking for that, so `sdk` counts
  as the user's ask; only the machine's own turns do not.
"""

from __future__ import annotations

# UserPromptSubmit `source`s of prompts no person typed.
MACHINE_PROMPT_SOURCES = ("system", "loop_wakeup", "schedule_wakeup", "poll_event")
# How Claude Code's own turns open when `source` is missing (a background agent finished).
MACHINE_PROMPT_OPENINGS = ("<task-notification>",)
# What a machine turn without `source` is recorded as: its transcript's `promptSource`.
INFERRED_MACHINE_SOURCE = "system"

# Our own MCP server, as Claude Code names it (.claude-plugin/plugin.json `name`, .mcp.json's server).
OWN_MCP_SERVER = "plugin:memory-anchor:memory"  # PostToolUse `mcp_server.name` (2.1.332)
OWN_MCP_TOOL_PREFIX = "mcp__plugin_memory-anchor_memory__"  # tool names, every version


def prompt_source(source: object, prompt: object) -> str | None:
    """Who sent the prompt: Claude Code's `source` when it says, `system` for a machine turn
    recognised by its text, else None (unknown: taken as typed by a person, as before 2.1.x)."""
    if isinstance(source, str) and source:
        return source
    if isinstance(prompt, str) and prompt.lstrip().startswith(MACHINE_PROMPT_OPENINGS):
        return INFERRED_MACHINE_SOURCE
    return None


def typed_by_person(source: object, prompt: object) -> bool:
    """Is this the user's ask (typed in the composer or given to `claude -p` / the SDK)?"""
    return prompt_source(source, prompt) not in MACHINE_PROMPT_SOURCES


def is_own_memory_tool(tool_name: object, mcp_server: object) -> bool:
    """Is this tool use one of our own memory tools (its result is memory already)?"""
    server = mcp_server.get("name") if isinstance(mcp_server, dict) else None
    return server == OWN_MCP_SERVER or (isinstance(tool_name, str) and tool_name.startswith(OWN_MCP_TOOL_PREFIX))
