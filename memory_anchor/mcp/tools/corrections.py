"""Correcting memory on the user's word: forget_memory, edit_memory, and record_user_answer
for what waits for the user to say whether it holds.

Items are named as the SessionStart briefing prints them: `fact 1a2b3c4d` for a
rule, decision, preference or other fact, `step 12` for an open next step. The
worker records the agent as the one who made the change and the user's words
as the reason.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memory_anchor.schemas.corrections import ItemRefError, correction_path
from mcp.server.mcpserver.exceptions import ToolError
from memory_anchor.mcp.app import mcp
from memory_anchor.mcp.worker_gateway import agent, call, current_project, session_id

# Who the worker records: the session's agent, else the one the worker files Claude Code under.
DEFAULT_AGENT = "claude-code"

Item = Annotated[str, Field(min_length=1, max_length=100, description="As the briefing shows it: `fact 1a2b3c4d` or `step 12`")]
Reason = Annotated[str, Field(min_length=1, max_length=2000, description="What the user said, in their words")]


def _correct(item: str, action: str, body: dict) -> dict:  # action: forget, edit or answer
    try:
        path = correction_path(item, action)  # type: ignore[arg-type]
    except ItemRefError as exc:
        raise ToolError(str(exc)) from None
    return call("POST", path, {**body, "agent_id": agent() or DEFAULT_AGENT, "project": current_project()})


@mcp.tool(structured_output=False)  # plain text: compact for the model
def forget_memory(item: Item, reason: Reason) -> str:
    """Forget a standing rule, decision, preference, fact or open next step because the user says it is wrong
    or no longer wanted ("forget that rule", "that's not a decision we made", "drop that next step").

    Use it only when the user asks; never to tidy up on your own. It is gone from the
    briefing and from recall and search at once, and extracting the same words again
    (the same prompt, a re-import, a later session) does not bring it back. The
    identity layer is not forgotten here (propose_identity_change).
    """
    out = _correct(item, "forget", {"reason": reason})
    return f"forgot {out['ref']}: {out['text']}"


@mcp.tool(structured_output=False)  # plain text: compact for the model
def edit_memory(
    item: Item,
    text: Annotated[str, Field(min_length=1, max_length=5000, description="The corrected text, as the user wants it")],
    reason: Reason,
) -> str:
    """Correct the text of a standing rule, decision, preference, fact or open next step when the user
    says how it should read ("no, we deploy with render, not fly.io").

    Use it only on the user's word. The fact keeps its category; the old wording is kept
    out of memory like a forgotten one, so extraction cannot bring it back.
    """
    out = _correct(item, "edit", {"text": text, "reason": reason})
    return f"{out['ref']} now reads: {out['text']} (was: {out['previous_text']})"


@mcp.tool(structured_output=False)  # plain text: compact for the model
def record_user_answer(
    item: Item,
    holds: Annotated[bool, Field(description="True when the user says it stands for later work; false when it was a one-off or is wrong")],
    user_reply: Annotated[str, Field(min_length=1, max_length=2000, description="The user's answer, quoted from their message")],
) -> str:
    """Record what the user answered when you asked whether something memory holds stands: an item of
    the briefing's "Possible decisions to ask the user about once" list, or an instruction they gave once.

    Ask first, in plain words, and call this only with their reply: the worker looks for
    `user_reply` in the user's latest messages of this session and refuses an answer they did not
    give. It holds: a standing rule or decision from the next briefing on. It does not: it is
    dropped, and the same words extracted again stay out.
    """
    out = _correct(item, "answer", {"holds": holds, "user_words": user_reply, "session_id": session_id()})
    return f"{out['ref']} is {out['status']}: {out['text']}"
