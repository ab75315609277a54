"""`MemoryModel`: the five layers, approvals, conflicts, relations and fact
extraction behind one object (`services.memory`), and the agent-facing
operations that go through the read-only policy.

Handlers and MCP tools call the methods here; each layer's rules live in its
own module (identity.py, active_context.py, events.py, facts.py, operations.py).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from memory_anchor.schemas.events import typed_by_person
from memory_anchor.schemas.memory_model import (
    EVENT_LOG,
    IDENTITY,
    VERIFIED_FACT,
    AddMemoryIn,
    Decision,
    EventIn,
    FactIn,
    IdentityProposal,
    IdentityWrite,
    PromoteRequest,
    RelationIn,
    normalize_layer,
)
from memory_anchor.worker.memory.active_context import ActiveContext, describe
from memory_anchor.worker.memory.agents import AgentPolicy
from memory_anchor.worker.memory.approvals import ApprovalQueue
from memory_anchor.worker.memory.common import DEFAULT_AGENT, agent_actor, human_actor, now
from memory_anchor.worker.memory.conflicts import ConflictService
from memory_anchor.worker.memory.corrections import Corrections
from memory_anchor.worker.memory.events import EventLog
from memory_anchor.worker.memory.extraction import FactExtractor, Material
from memory_anchor.worker.memory.facts import FactStore
from memory_anchor.worker.memory.finder import Finder
from memory_anchor.worker.memory.form import CAUSE_LABEL, fragment, opens_on_speaker
from memory_anchor.worker.memory.outcomes import names_code
from memory_anchor.worker.memory.forgotten import Forgotten
from memory_anchor.worker.memory.identity import IdentityService, refuse_agent_identity_write
from memory_anchor.worker.memory.open_items import OpenItems
from memory_anchor.worker.memory.steps_done import StepsDoneByCommits
from memory_anchor.worker.memory.provenance import Prompt
from memory_anchor.worker.memory.source_recheck import recheck_standing
from memory_anchor.worker.memory.operations import OperationsIndex
from memory_anchor.worker.memory.relations import RelationStore
from memory_anchor.worker.memory.retrieval import Retrieval
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.open_items import projects_with_open_steps
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, resolve_view

log = logging.getLogger(__name__)


class MemoryModel:
    def __init__(
        self,
        db: Database,
        *,
        read_only_agents: list[str] | None = None,
        search: Callable[[], Any] | None = None,
        llm: Callable[[], Any] | Any = None,
        redact: Callable[[str], str] | None = None,
        active_ttl_seconds: int = 3600,
        codebase: Any = None,
        code_checks: bool = True,
    ):
        self.db = db
        self.code_checks = code_checks  # off: facts are never demoted for their code (settings.code_checks)
        self.finder = Finder(db, search)
        self.approvals = ApprovalQueue(db)
        self.policy = AgentPolicy(self.approvals, read_only_agents or [])
        self.identity = IdentityService(db)
        self.active = ActiveContext(default_ttl=active_ttl_seconds)
        self.events = EventLog(db, self.finder, redact)
        self.forgotten = Forgotten(db)
        self.facts = FactStore(db, self.finder, self.approvals, redact, self.forgotten, codebase)
        self.conflicts = ConflictService(db, self.facts)
        self.relations = RelationStore(db)
        self.open_items = OpenItems(db, self.forgotten)
        self.steps_done = StepsDoneByCommits(db)
        self.corrections = Corrections(db, self.facts, self.forgotten, redact)
        self.operations = OperationsIndex(db, self.finder)
        self.extractor = FactExtractor(db, self.facts, self.conflicts, llm, redact, self.policy)
        self.retrieval = Retrieval(self)
        self.approvals.register("identity_change", self._approve_identity)
        self.approvals.register("fact", self.facts.approve_pending, self.facts.reject_pending)
        self.approvals.register("agent_write", self._approve_agent_write)

    @classmethod
    def for_services(cls, services) -> "MemoryModel":
        """Build from the worker's Services (search engine and Claude built lazily)."""
        from memory_anchor.core.redact import redact_text

        def search():
            return services.search

        def llm():
            return services.llm if services.llm_available() else None

        return cls(
            services.db,
            read_only_agents=list(getattr(services.settings, "read_only_agents", []) or []),
            search=search,
            llm=llm,
            redact=redact_text,
            codebase=services.codebase,
            code_checks=services.settings.code_checks,
        )

    # --- L0: agents may only propose ------------------------------------------------

    def propose_identity_change(self, proposal: IdentityProposal) -> dict[str, Any]:
        agent_id = proposal.agent_id or DEFAULT_AGENT
        with self.db.transaction() as conn:
            if proposal.target_id:
                current = Records.get(conn, proposal.target_id, resolve_view(conn, MAIN))
                if current is None or current["kind"] != "identity":
                    raise NotFound(f"identity item {proposal.target_id} not found")
            approval = self.approvals.create(
                conn, "identity_change", proposal.action, proposal.model_dump(mode="json"), project=proposal.project,
                agent_id=agent_id, session_id=proposal.session_id, record_id=proposal.target_id, reason=proposal.reason,
            )  # fmt: skip
        return {
            "status": "proposed",
            "approval_id": approval["id"],
            "message": "the proposal waits for a human: memory-anchor approvals approve "
            f"{approval['id']} (three confirmations) or reject {approval['id']}",
        }

    def _approve_identity(self, conn, approval: dict[str, Any], decision: Decision) -> str:
        payload = approval["payload"]
        write = IdentityWrite(
            content=payload.get("content"), priority=payload.get("priority"), project=payload.get("project") or "",
            confirmations=decision.confirmations, actor=decision.actor,
            reason=f"{approval['action'].upper()} (approved proposal {approval['id']} from agent {approval['agent_id']}: "
            f"{approval['reason']})",
        )  # fmt: skip
        action = approval["action"]
        if action == "add":
            return self.identity.add(write)["id"]
        if action == "edit":
            return self.identity.edit(approval["record_id"], write)["id"]
        return self.identity.remove(approval["record_id"], write)["id"]

    # --- L1 ---------------------------------------------------------------------------------

    def end_session(self, session_id: str, *, agent_id: str | None = None, project: str = "",
                    branch: str = MAIN, write_event: bool = True) -> dict[str, Any]:  # fmt: skip
        """Session over: what is left of its working memory becomes an L2 event."""
        left = self.active.end_session(session_id, agent_id=agent_id)
        out: dict[str, Any] = {"session_id": session_id, "left": left, "event_id": None}
        if left and write_event:
            event = EventIn(content=describe(left), when=now(), source="system", project=project,
                            agent_id=agent_id, session_id=session_id, branch=branch, tags=["active_context"])  # fmt: skip
            result = self.log_event(event, actor="system:session-end")
            out["event_id"] = (result.get("record") or {}).get("id")
            out["approval_id"] = result.get("approval_id")
        return out

    # --- writes that go through the read-only policy -------------------------------------------

    def _guarded(self, operation: str, payload_model, agent_id: str | None, *, project: str = "",
                 branch: str | None = None, session_id: str | None = None, extra: dict[str, Any] | None = None):  # fmt: skip
        """A read-only agent's write as a proposal, or None. `extra` joins the payload as it is
        queued: a proposal is written once (on team storage a member may not rewrite one)."""
        if not self.policy.is_read_only(agent_id):
            return None
        payload = {**payload_model.model_dump(mode="json"), **(extra or {})}
        with self.db.transaction() as conn:
            return self.policy.propose(conn, operation, payload, agent_id=agent_id,
                                       project=project, branch=branch or MAIN, session_id=session_id)  # fmt: skip

    def log_event(self, event: EventIn, *, actor: str | None = None) -> dict[str, Any]:
        proposed = self._guarded("log_event", event, event.agent_id, project=event.project, branch=event.branch,
                                 session_id=event.session_id)  # fmt: skip
        if proposed:
            return proposed
        record = self.events.log(event, actor=actor)
        return {"status": "active", "record": record}

    def add_fact(self, fact: FactIn, *, actor: str | None = None) -> dict[str, Any]:
        proposed = self._guarded("add_fact", fact, fact.agent_id, project=fact.project, branch=fact.branch,
                                 session_id=fact.session_id)  # fmt: skip
        if proposed:
            return proposed
        return self.facts.add(fact, actor=actor)

    def add_memory(self, request: AddMemoryIn) -> dict[str, Any]:
        """add_memory: into L2 or L3; the identity layer is refused."""
        try:
            layer = normalize_layer(request.layer)
        except ValueError as exc:
            raise RecordError(str(exc), code="invalid_layer")
        if layer == IDENTITY:
            refuse_agent_identity_write(request.agent_id)
        if layer == EVENT_LOG:
            return self.log_event(EventIn(
                content=request.content, when=request.when if request.when is not None else now(), where=request.where,
                who=request.who, project=request.project, agent_id=request.agent_id, session_id=request.session_id,
                branch=request.branch, tags=request.tags,
            ))  # fmt: skip
        if layer == VERIFIED_FACT:
            return self.add_fact(FactIn(
                text=request.content, confidence=request.confidence, subject=request.subject, project=request.project,
                agent_id=request.agent_id, session_id=request.session_id, branch=request.branch, tags=request.tags,
                when=request.when,
            ))  # fmt: skip
        raise RecordError(f"add_memory writes to event_log or verified_fact, not {layer}", code="invalid_layer")

    def promote_to_fact(self, event_id: str, request: PromoteRequest, *, actor: str | None = None) -> dict[str, Any]:
        """L2 → L3: a fact whose source is the event; the event stays, marked as promoted."""
        proposed = self._guarded("promote_to_fact", request.model_copy(update={"text": request.text}), request.agent_id,
                                 branch=request.branch, extra={"event_id": event_id})  # fmt: skip
        if proposed:
            proposed["event_id"] = event_id
            return proposed
        branch = request.branch or MAIN
        agent_id = request.agent_id or DEFAULT_AGENT
        actor = actor or agent_actor(agent_id)
        with self.db.transaction() as conn:
            view = resolve_view(conn, branch)
            event = Records.get(conn, event_id, view)
            if event is None or event["kind"] != "event":
                raise NotFound(f"event {event_id} not found")
            if event["data"].get("promoted_to"):
                raise RecordError(f"event {event_id} was already promoted to fact {event['data']['promoted_to']}",
                                  code="conflict", status=409)  # fmt: skip
            stored = self.facts.add(FactIn(
                text=request.text or event["text"], confidence=request.confidence, subject=request.subject,
                project=event["project"], agent_id=agent_id, session_id=event["session_id"], source="promotion",
                source_id=event_id, when=event["happened_at"], branch=branch,
            ), actor=actor, conn=conn, reason=f"PROMOTE (from event {event_id})")  # fmt: skip
            if stored.get("record"):
                Records.update(conn, event_id, branch=branch, actor=actor, reason="PROMOTED", view=view,
                               data={**event["data"], "promoted_to": stored["record"]["id"]})  # fmt: skip
        return {**stored, "event_id": event_id}

    def write_relation(self, relation: RelationIn) -> dict[str, Any]:
        proposed = self._guarded("write_relation", relation, relation.agent_id, project=relation.project, branch=relation.branch)
        if proposed:
            return proposed
        return {"status": "active", "record": self.relations.write(relation)}

    def _approve_agent_write(self, conn, approval: dict[str, Any], decision: Decision) -> str | None:
        """Perform a read-only agent's write now, as that agent, noting who approved it."""
        op, payload, agent_id = approval["action"], dict(approval["payload"]), approval["agent_id"]
        actor = f"{agent_actor(agent_id)} (approved by {human_actor(decision.actor)})"
        reason = f"APPROVED proposal {approval['id']}"
        if op == "log_event":
            return self.events.log(EventIn.model_validate(payload), actor=actor, conn=conn, reason=reason)["id"]
        if op == "add_fact":
            stored = self.facts.add(FactIn.model_validate(payload), actor=actor, conn=conn, reason=reason)
            return (stored.get("record") or {}).get("id")
        if op == "write_relation":
            return self.relations.write(RelationIn.model_validate(payload), actor=actor, conn=conn)["id"]
        if op == "promote_to_fact":
            event_id = payload.pop("event_id")
            request = PromoteRequest.model_validate(payload)
            event = Records.get(conn, event_id, resolve_view(conn, request.branch or MAIN))
            if event is None:
                raise NotFound(f"event {event_id} not found")
            stored = self.facts.add(FactIn(
                text=request.text or event["text"], confidence=request.confidence, subject=request.subject,
                project=event["project"], agent_id=agent_id, source="promotion", source_id=event_id,
                branch=request.branch,
            ), actor=actor, conn=conn, reason=reason)  # fmt: skip
            return (stored.get("record") or {}).get("id")
        if op == "fact_decision":
            target = None
            if payload.get("target_id"):
                target = Records.get(conn, payload["target_id"], resolve_view(conn, payload.get("branch") or MAIN))
            result = self.extractor.apply_decision(
                conn, event=payload["event"], text=payload["text"], confidence=payload["confidence"],
                subject=payload.get("subject"), category=payload.get("category"), target=target,
                new_text=payload.get("new_text"), project=payload.get("project") or "",
                branch=payload.get("branch") or MAIN, agent_id=agent_id, actor=actor, session_id=approval["session_id"],
                source_id=payload.get("source_id"), source="approval", observed_at=now(), reason=reason,
            )  # fmt: skip
            return result.get("id")
        raise RecordError(f"unknown proposed operation {op!r}", code="internal_error", status=500)

    # --- extraction: the one entry point for the pipeline -------------------------------------

    def extract(self, material: Material):
        return self.extractor.extract(material)

    def on_pipeline_event(self, event_name: str, event: Any, written: dict[str, Any]) -> None:
        """After-event hook for the pipeline (`pipeline.after_event.append(memory.on_pipeline_event)`).

        Runs on the pipeline's thread, after the event is stored: never on a hook's path.

        - UserPromptSubmit without Claude: the prompt's standing instructions and
          decisions become facts (local cue words; with Claude they wait for Stop);
        - PostToolUse without Claude: an observation an agent wrote on purpose may
          become a fact (captured tool uses never do);
        - PreCompact: the transcript (or, without one, the session's observations) is
          extracted before compaction loses it;
        - Stop / SessionEnd: the session's outcome updates the open items (its next
          steps open, what it did closes earlier ones); with Claude, the summary,
          the session's prompts and observations are extracted;
          SessionEnd also ends the session's active context (kept as an L2 event).
        """
        session = written.get("session") or {}
        record = written.get("record") or {}
        base = dict(
            project=session.get("project") or "", agent_id=session.get("agent_id"),
            session_id=getattr(event, "session_id", None) or session.get("session_id"),
            branch=session.get("branch") or MAIN, source_id=f"inbox:{getattr(event, 'id', '')}",
            observed_at=getattr(event, "received_at", None),  # an imported event's original time
            # Imported history is distilled locally unless the user asked for Claude (its allowance).
            local_only=bool(getattr(event, "local_only", False)),
        )  # fmt: skip
        claude = not base["local_only"] and self.extractor._client() is not None
        if event_name == "UserPromptSubmit" and record.get("kind") == "prompt" and not claude and typed_by_person(record):
            self.extract(Material(source="prompt", text=record.get("text", ""), **{**base, "source_id": record["id"]},
                                  answers_a_question=bool((record.get("data") or {}).get("answers_a_question"))))  # fmt: skip
        elif event_name == "PostToolUse" and record.get("kind") == "observation" and not claude:
            self.extract(Material(source="observation", observations=[record], **base))
        elif event_name == "PreCompact":
            text = self._transcript_text(written.get("transcript_path")) if claude else ""
            observations = [] if text else self._session_observations(base)
            if text or (claude and observations):
                self.extract(Material(source="transcript" if text else "observation", text=text,
                                      observations=observations, prompts=self._session_prompts(base), **base))  # fmt: skip
        elif event_name in ("Stop", "SessionEnd"):
            if record.get("kind") == "summary" and base["session_id"]:
                self._record_outcome(record, base)
                causes = root_cause_facts(record.get("data") or {})
                if causes and not claude:
                    self.extract(Material(source="summary", root_causes=causes, **base))
            if claude and record.get("kind") == "summary":
                self.extract(Material(source="summary", text=record.get("text", ""), prompts=self._session_prompts(base),
                                      observations=self._session_observations(base), **base))  # fmt: skip
            if event_name == "SessionEnd" and base["session_id"]:
                self.end_session(base["session_id"], agent_id=base["agent_id"], project=base["project"], branch=base["branch"])

    def _record_outcome(self, summary: dict[str, Any], base: dict[str, Any]) -> None:
        data = summary.get("data") or {}
        done = [d for d in (data.get("done") or []) if isinstance(d, str)]
        if not done and data.get("completed"):
            done = [str(data["completed"])]
        with self.db.transaction() as conn:
            self.open_items.record_outcome(
                conn, project=base["project"], branch=base["branch"], session_id=base["session_id"],
                next_steps=[n for n in (data.get("next") or []) if isinstance(n, str)], done=done,
                at=summary.get("happened_at"),
            )  # fmt: skip

    def _session_prompts(self, base: dict[str, Any], limit: int = 50) -> list[Prompt]:
        """The prompts a person typed in the session (the only source a standing rule may have)."""
        if not base.get("session_id"):
            return []
        conn = self.db.reader()
        rows, _ = Records.query(conn, resolve_view(conn, base["branch"]), filters={"kind": "prompt", "session_id": base["session_id"]},
                                order="seq ASC", limit=limit)  # fmt: skip
        return [Prompt(r["text"], bool((r.get("data") or {}).get("answers_a_question"))) for r in rows if typed_by_person(r)]

    def _session_observations(self, base: dict[str, Any], limit: int = 200) -> list[dict[str, Any]]:
        if not base.get("session_id"):
            return []
        conn = self.db.reader()
        rows, _ = Records.query(conn, resolve_view(conn, base["branch"]),
                                filters={"kind": "observation", "session_id": base["session_id"]}, limit=limit)  # fmt: skip
        return rows

    @staticmethod
    def _transcript_text(path: str | None) -> str:
        if not path:
            return ""
        try:
            from memory_anchor.worker.capture import transcript  # the distillation engineer's reader

            reader = getattr(transcript, "transcript_text", None) or getattr(transcript, "read_transcript_text", None)
            if reader is not None:
                return str(reader(path) or "")
        except ImportError:
            pass
        except Exception:
            log.warning("reading transcript %s failed", path, exc_info=True)
            return ""
        from pathlib import Path

        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")[-200_000:]
        except OSError:
            return ""

    def add_from_messages(self, request, *, branch: str = MAIN, happened_at: float | None = None,
                          actor: str | None = None) -> list[dict[str, Any]] | None:  # fmt: skip
        """The mem0 `infer: true` path: extract facts from messages and manage them.

        None when Claude gave no usable reply, so that the mem0 API stores the
        messages as they are rather than losing them."""
        text = "\n".join(f"{role}: {content}" for role, content in request.texts())
        outcome = self.extract(Material(
            source="messages", text=text, project=request.project or "", agent_id=request.agent_id,
            session_id=request.run_id, branch=branch, observed_at=happened_at,
        ))  # fmt: skip
        if outcome.mode != "claude":
            return None  # no usable model reply: the caller stores the messages as given
        return [r for r in outcome.results if r.get("event") in ("ADD", "UPDATE", "DELETE", "NONE")]

    # --- maintenance ----------------------------------------------------------------------------

    def maintain(self, at: float | None = None) -> dict[str, int]:
        """The periodic job: archive expired events, purge old identity removals, sweep L1, hold
        rules an earlier version extracted to the source rule (source_recheck.py), close the
        open steps commits did (steps_done.py), and demote the facts whose files are gone."""
        return {
            "steps_done_by_commits": self.close_steps_done(),
            "facts_checked_against_code": self.check_facts_against_code(),
            "events_archived": self.events.archive_expired(at),
            "identity_purged": self.identity.purge_expired(at),
            "active_context_expired": self.active.sweep(),
            "rules_sent_for_approval": recheck_standing(self.db, self.approvals),
        }

    def check_facts_against_code(self) -> int:
        """Demote the facts whose files are gone and restore those whose files are back; returns how
        many changed. Here, in the maintenance job and the git watch, and in `verify --fix`: the
        briefing and recall show the same state without writing it."""
        if not self.code_checks:
            return 0
        changed = self.facts.reconcile_all_with_code()
        return changed["demoted"] + changed["restored"]

    def close_steps_done(self) -> int:
        """Close the open steps commits did, in every project that has some (once per HEAD); how many."""
        projects = projects_with_open_steps(self.db.reader())
        return sum(len(self.steps_done.close(project)) for project in projects)


def root_cause_facts(summary: dict[str, Any]) -> list[str]:
    """A session's root causes as standalone facts: what was fixed, and why it broke. What was done
    leads only when it reads as a report of its own: not cut off ("Removed the Group column from"),
    not the speaker's account ("I've added …"). Several causes lead with it only when it names the
    code it changed; otherwise they are the points of what it introduces ("the logs show the two
    providers' problems: …"), and each stands alone."""
    done = [d for d in summary.get("done") or [] if isinstance(d, str)]
    causes = [c for c in summary.get("root_causes") or [] if isinstance(c, str) and c.strip()]
    context = done[0].rstrip("。.") if len(done) == 1 and (len(causes) == 1 or names_code(done[0])) else ""
    if context and (fragment(context) is not None or opens_on_speaker(context)):
        context = ""
    return [f"{context}{'. ' if cause.startswith(CAUSE_LABEL) else ': '}{cause}" if context and cause not in context
            else cause for cause in causes]  # fmt: skip
