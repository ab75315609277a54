"""Compression with Claude: the prompts, and turning replies into drafts.

Pure functions, no I/O: the Distiller (memory_anchor/worker/pipeline/compress/distiller.py) makes the
call. Claude's reply is merged onto the local draft of the same tool use, so
what the payload states for certain (tool, command, outcome, exit code, files
touched) survives a vague or partial reply, and a reply that is missing an item
or has a bad field only loses Claude's wording for that item.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory_anchor.schemas.observations import (
    OBSERVATION_TYPES,
    SUMMARY_MAX_CHARS,
    TITLE_MAX_CHARS,
    ObservationDraft,
    SessionSummaryDraft,
    shorten,
)
from memory_anchor.core.projects import relative
from memory_anchor.core.redact import sanitize
from memory_anchor.worker.pipeline.compress.local import FILE_CHANGERS, text_of
from memory_anchor.worker.pipeline.compress.shell_files import only_shows
from memory_anchor.worker.memory.outcomes import is_narration, is_plan

# Per-string limit for what is sent: a batch of tool uses must fit in one call.
FIELD_MAX_CHARS = 4000
NARRATIVE_MAX_CHARS = 2000
MAX_FACTS = 8
MAX_CONCEPTS = 8
MAX_FILES = 30

OBSERVATION_SYSTEM = f"""You are the memory of an AI coding assistant. You receive tool uses \
from a coding session (tool name, input, output) and compress each into an observation that will \
help the assistant in future sessions: what was done, what was learned, what changed.

For each tool use return an object with:
- "index": the tool use's index, as given
- "type": one of {", ".join(OBSERVATION_TYPES)} (decision: a choice and its reason; bugfix: something \
broken was fixed; refactor: restructured, same behaviour; feature: new capability or file; change: other \
modification; discovery: learned by reading, searching or running; note: plans, todo lists; event: \
something happened)
- "title": at most 80 characters, specific ("Fixed off-by-one in paginate()", not "Edited file")
- "summary": one sentence, at most {SUMMARY_MAX_CHARS} characters
- "narrative": 1-3 sentences of useful detail (why, what was found), or ""
- "facts": short standalone statements worth remembering (file paths, names, versions, errors), may be []
- "concepts": a few lowercase topic keywords
- "files_read" and "files_modified": file paths

Reply as {{"observations": [ ... ]}} with one object per tool use. Never invent details that are not \
in the tool use. Text like [REDACTED:...] stands for a removed secret: never try to restore it."""

SUMMARY_SYSTEM = """You are the memory of an AI coding assistant. From a session's user prompts, \
the observations recorded during it and the assistant's last message, write a session summary for \
future sessions. Reply as {"investigated": "...", "learned": "...", "completed": "...", "done": ["..."], \
"root_causes": ["..."], "next_steps": ["..."], "files": ["..."]}: each text field one to three \
sentences (empty string if nothing applies); "done" the outcomes the session reached (what changed in \
the project, which tests now pass); "root_causes" the causes of problems it found, stated about the \
code (with the evidence), never the agents' account of their own process ("the issue was \
reproduced", "the Debugger identified the function"); "next_steps" only work the session left \
UNDONE at its end that someone should still do, never the assistant's passing plan for its own next \
move ("next I will run the tests", "the next step is to have the Tester verify"), never items of its \
todo list that it was working through; each item one short standalone sentence (empty lists if \
none: most sessions leave none); files the most relevant paths. Only state what the material \
supports. Write in the language the user wrote in."""


def observations_prompt(payloads: Sequence[dict[str, Any]]) -> str:
    """The user message for a batch: each tool use, redacted and cut to size."""
    parts = []
    for index, payload in enumerate(payloads):
        payload = payload if isinstance(payload, dict) else {"tool_response": payload}
        item = sanitize(
            {
                "tool_name": payload.get("tool_name"),
                "tool_input": payload.get("tool_input"),
                "tool_response": payload.get("tool_response"),
            },
            FIELD_MAX_CHARS,
            max_items=100,
        )
        cwd = payload.get("cwd")
        where = f' cwd="{sanitize(cwd, 300)}"' if isinstance(cwd, str) and cwd else ""
        body = json.dumps(item, ensure_ascii=False, default=str, indent=1)
        parts.append(f'<tool_use index="{index}"{where}>\n{body}\n</tool_use>')
    return f"{len(parts)} tool uses:\n\n" + "\n\n".join(parts)


def observations_max_tokens(count: int) -> int:
    return min(350 * count + 300, 8192)


def merge_observations(reply: Any, local: Sequence[ObservationDraft],
                       payloads: Sequence[Any] = ()) -> tuple[list[ObservationDraft], int]:  # fmt: skip
    """Claude's items merged onto the local drafts: (drafts, how many came from Claude).

    Items are matched by "index" (by position when the reply has none and the
    count is right); anything unusable keeps the local draft. `payloads`: the tool
    uses, in the same order, that Claude's changed files are held to.
    """
    items = reply.get("observations") if isinstance(reply, dict) else reply
    if not isinstance(items, list):
        return list(local), 0
    by_index: dict[int, dict[str, Any]] = {}
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            index = position if len(items) == len(local) else None
        if index is not None and 0 <= index < len(local) and index not in by_index:
            by_index[index] = sanitize(item, NARRATIVE_MAX_CHARS)
    merged, used = [], 0
    for index, base in enumerate(local):
        draft = _merge_one(by_index.get(index), base, payloads[index] if index < len(payloads) else None)
        used += draft.distilled_by == "claude"
        merged.append(draft)
    return merged, used


def _texts(value: Any, limit: int, each: int) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = [shorten(v, each) for v in value if isinstance(v, str) and v.strip()]
    return list(dict.fromkeys(out))[:limit]


def said_changed(paths: list[str], payload: Any) -> list[str]:
    """The files Claude says a tool use changed that the tool use itself names, held to the source as facts
    are: a path it never mentions, or one a command that only shows files printed (`cat`, `git diff`), is
    Claude's guess about what a program might have written, and memory asserts no guess. Without the
    payload, none."""
    if not isinstance(payload, dict):
        return []
    tool_input = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
    command = tool_input.get("command") if isinstance(tool_input.get("command"), str) else ""
    if command and only_shows(command):
        return []
    said = json.dumps(tool_input, ensure_ascii=False) + "\n" + text_of(payload.get("tool_response"), 200_000)
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    return [p for p in paths if p in said or relative(p, cwd) in said]


def change_not_made(base: ObservationDraft, payload: Any) -> bool:
    """Is this the observation of an edit that did not happen (local.py `_change_not_made`)?"""
    tool = payload.get("tool_name") if isinstance(payload, dict) else None
    return tool in FILE_CHANGERS and base.outcome == "error" and not base.files_modified


def _merge_one(item: dict[str, Any] | None, base: ObservationDraft, payload: Any = None) -> ObservationDraft:
    if not item:
        return base
    title = item.get("title") if isinstance(item.get("title"), str) else ""
    summary = item.get("summary") if isinstance(item.get("summary"), str) else ""
    if not title.strip() and not summary.strip():
        return base
    kind = item.get("type") if item.get("type") in OBSERVATION_TYPES else base.type
    narrative = item.get("narrative", item.get("details"))
    return base.model_copy(
        update={
            "type": kind,
            "title": shorten(title, TITLE_MAX_CHARS) if title.strip() else base.title,
            "summary": shorten(summary, SUMMARY_MAX_CHARS) if summary.strip() else base.summary,
            # Claude's narrative explains; the local one (output, diff) is the evidence: keep both.
            "narrative": "\n\n".join(
                p for p in (narrative.strip() if isinstance(narrative, str) else "", base.narrative) if p
            ),
            "facts": _texts(item.get("facts"), MAX_FACTS, 300) or base.facts,
            "concepts": list(
                dict.fromkeys(
                    [c.lower() for c in _texts(item.get("concepts", item.get("tags")), MAX_CONCEPTS, 40)]
                    + base.concepts
                )
            )[:MAX_CONCEPTS],
            "files_read": list(dict.fromkeys(base.files_read + _texts(item.get("files_read"), MAX_FILES, 300)))[
                :MAX_FILES
            ],
            # An edit the user refused or that failed changed nothing, whatever Claude reads into it.
            "files_modified": list(
                dict.fromkeys(base.files_modified + ([] if change_not_made(base, payload) else
                                                     said_changed(_texts(item.get("files_modified"), MAX_FILES, 300), payload)))
            )[:MAX_FILES],  # fmt: skip
            "distilled_by": "claude",
        }
    )


def summary_prompt(prompts: Sequence[str], observations: Sequence[ObservationDraft], last_message: str) -> str:
    lines = ["User prompts:"]
    lines += [f"- {shorten(p, 500)}" for p in prompts[:15]] or ["- (none)"]
    lines.append("\nObservations (type: title; summary):")
    for obs in observations[-80:]:
        lines.append(f"- {obs.type}: {obs.title}; {obs.summary}")
    if not observations:
        lines.append("- (none)")
    if last_message:
        lines.append(f"\nAssistant's last message:\n{shorten(last_message, 2000)}")
    return sanitize("\n".join(lines))


def merge_summary(reply: Any, local: SessionSummaryDraft) -> SessionSummaryDraft | None:
    """Claude's summary fields over the local summary; None when the reply is unusable."""
    if not isinstance(reply, dict):
        return None
    reply = sanitize(reply, 2000)
    update: dict[str, Any] = {}
    # What was asked stays in the user's words (the local subject), never a paraphrase.
    for key in ("investigated", "learned", "completed"):
        value = reply.get(key)
        if isinstance(value, list):
            value = "; ".join(v for v in value if isinstance(v, str))
        if isinstance(value, str) and value.strip():
            update[key] = shorten(value, 1000)
    for key, field in (("done", "done"), ("root_causes", "root_causes"), ("next_steps", "next")):
        items = _texts(reply.get(key), 6, 300)
        # The code holds Claude to what the prompt asks: no narration as a cause, no passing plan as a step.
        if field == "root_causes":
            items = [i for i in items if not is_narration(i)]
        elif field == "next":
            items = [i for i in items if not is_plan(i)]
        if items or (field == "next" and key in reply):
            update[field] = items
    if "next" in update:
        update["next_steps"] = "; ".join(update["next"])
    if not update:
        return None
    files = list(dict.fromkeys(_texts(reply.get("files"), MAX_FILES, 300) + local.files))[:MAX_FILES]
    summary = local.model_copy(update={**update, "files": files, "distilled_by": "claude"})
    summary.text = summary.render()
    return summary
