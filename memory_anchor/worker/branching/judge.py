"""The Claude merge judge: decides conflicts the rules cannot, consolidates squashed facts.

Used only when the worker's Claude client is available (a key is set and the
daily budget is not spent); otherwise conflicts stay open for a human. A reply
that does not fit `JudgeReply` counts as no decision, never as a guess.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from memory_anchor.schemas.branches import ConsolidationReply, JudgeReply
from memory_anchor.worker.branching.diff import Conflict
from memory_anchor.worker.branching.merge import JudgeDecision

log = logging.getLogger(__name__)

RESOLVE_SYSTEM = (
    "You merge the memory of AI coding agents. Two branches of memory disagree about one thing. "
    "Decide which version is correct for the project, judging by specificity, evidence and recency. "
    'Answer {"keep": "source" | "target" | "both", "reason": "...", "merged_text": null | "..."}. '
    "Use keep=both only when both are true at once; then merged_text may state them as one fact."
)

CONSOLIDATE_SYSTEM = (
    "You consolidate facts an AI coding agent learnt about one subject into one precise fact. "
    "Keep every concrete detail that is still true; drop repetition. "
    'Answer {"text": "..."}.'
)


class ClaudeJudge:
    def __init__(self, llm: Any):
        self.llm = llm

    @classmethod
    def from_services(cls, services: Any) -> "ClaudeJudge | None":
        """A judge when Claude can be called now, else None (conflicts then stay open)."""
        try:
            llm = services.llm
        except Exception:
            log.warning("no Claude client; merge conflicts will stay open", exc_info=True)
            return None
        return cls(llm) if getattr(llm, "available", False) else None

    def resolve(self, conflict: Conflict) -> JudgeDecision | None:
        prompt = json.dumps(
            {
                "subject": conflict.fact_key,
                "conflict": conflict.reason,
                "source": _describe(conflict.source.row),
                "target": _describe(conflict.target.row),
            },
            ensure_ascii=False,
            indent=1,
        )
        try:
            reply = JudgeReply.model_validate(self.llm.complete_json(RESOLVE_SYSTEM, prompt, max_tokens=512))
        except ValidationError as exc:
            log.warning("merge judge reply ignored: %s", exc)
            return None
        return JudgeDecision(reply.keep, reply.reason, reply.merged_text if reply.keep == "both" else None)

    def consolidate(self, fact_key: str, texts: list[str]) -> str | None:
        prompt = json.dumps({"subject": fact_key, "facts": texts}, ensure_ascii=False, indent=1)
        try:
            reply = ConsolidationReply.model_validate(
                self.llm.complete_json(CONSOLIDATE_SYSTEM, prompt, max_tokens=512)
            )
        except ValidationError as exc:
            log.warning("squash consolidation reply ignored: %s", exc)
            return None
        return reply.text


def _describe(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": row["kind"],
        "text": row["text"] if row["op"] == "put" else "(deleted)",
        "status": row["status"],
        "confidence": row.get("confidence"),
        "written_by": row.get("actor") or row.get("agent_id"),
        "branch": row["branch"],
    }
