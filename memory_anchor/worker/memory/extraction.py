"""Fact extraction and fact management, mem0 style.

Material (observations, a session summary, a PreCompact transcript, mem0
messages) goes through two steps:

1. *extract*: with Claude, a small model proposes standalone facts with a
   confidence (and, for a rule or decision, the user's words it stands on);
   without Claude, the local path reads the user's standing instructions and
   decisions out of the own words of prompts (`instructions.py`, English by
   form, Chinese, Japanese and Korean by cue words) and takes observations an
   agent wrote on purpose (decision, bugfix, ...) as facts. A captured tool use
   (a file created, edited or read, a command run) is an observation, never a
   fact. Every candidate, Claude's included, then passes the source rule
   (`provenance.py`): a standing rule only on the user's own words, no fact
   that narrates the agent's process;
2. *decide*: each candidate is compared with the most similar existing facts and
   gets an action: ADD, UPDATE (a new version supersedes the old), DELETE
   (invalidate) or NONE. With Claude the model decides; locally, a near-duplicate
   (similarity >= 0.85) is NONE, a statement that replaces what an earlier rule
   or decision said ("we use X instead of Y", "不再用 Y", "from now on …" on the
   same subject) is UPDATE of it, and anything else ADD.

Nothing the model says is trusted blindly: every reply is validated with
pydantic, an existing fact is named to the model by a small number (never its
id), a decision naming an unknown number falls back to the local rule, and a
malformed reply writes nothing it cannot justify. UPDATE and DELETE then go
through the conflict rules (`conflicts.settle`): what they cannot settle becomes
an open conflict with both versions kept. Statements keep the time they were
said: one said before the fact it would replace or contradict (old history
imported after months of live use), or before a later rule that says it
replaced what this one says ("we use black" before "… ruff instead of black"),
is kept in history as `superseded` by that fact and never briefed. Every write is versioned with actor
and reason, so history(id) tells the whole story.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from memory_anchor.schemas.memory_model import (
    FACT_PENDING,
    STANDING,
    DecisionReply,
    ExtractionOutcome,
    ExtractionReply,
    FactDecision,
    FactIn,
)
from memory_anchor.schemas.events import typed_by_person
from memory_anchor.schemas.observations import TYPE_TO_LAYER
from memory_anchor.worker.memory.common import DEFAULT_AGENT, agent_actor, now
from memory_anchor.worker.memory.conflicts import ConflictService, said_before, settle
from memory_anchor.worker.memory.cues import replaced_terms
from memory_anchor.worker.memory.instructions import USUAL, Ban, bans, standing_statements
from memory_anchor.worker.memory.facts import NEAR_DUPLICATE, FactStore
from memory_anchor.worker.memory.provenance import Prompt, check
from memory_anchor.worker.memory.user_words import OWN_PARAGRAPH, as_said
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import MAIN, Records, claude_texts_containing, prompts_containing, resolve_view

log = logging.getLogger(__name__)

ROOT_CAUSE_CONFIDENCE = 0.9
SAME_SUBJECT = 0.45  # a change of mind ("from now on …") updates a rule this similar
CATEGORY_OF = {"rule": "rule", "decision": "decision", "preference": "preference"}
_CHANGE_OF_MIND = re.compile(
    r"(?i)\b(now|anymore|any more|from now on|instead|switch|no longer|going forward)\b"
    r"|以后|今后|改用|换成|不再|今後|これから|変更|앞으로|이제|대신|변경"
)
# Tools whose use is captured: what they did is an observation, never a fact.
CAPTURED_TOOLS = frozenset({"Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Grep", "Glob", "LS",
                            "WebFetch", "WebSearch", "Task", "Agent", "TodoWrite"})  # fmt: skip
AGENT_CATEGORY = {"decision": "design"}
LOCAL_CONFIDENCE = 0.9  # a decision/bugfix/refactor observation states what was done
MAX_MATERIAL_CHARS = 24_000
SIMILAR_PER_CANDIDATE = 5

# A sentence of Claude's pasted back is compared without markup and spacing: the terminal shows
# Claude's Markdown rendered, without its marks ("**Never run X**" is pasted "Never run X").
_MARKUP = re.compile(r"[*_`#>|\[\]\"“”「」]+")
MIN_PASTED_CHARS = 12
_LONG_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{4,}")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]{4,}")


def _plain(text: str) -> str:
    """Text without markup and spacing, lower case: how a rendered copy and its source compare."""
    return re.sub(r"\s+", "", _MARKUP.sub("", text)).lower()


def _lookup_pieces(sentence: str) -> list[str]:
    """A few short pieces of a sentence to find the texts that may hold it: its three longest words, or
    four characters from the start, middle and end of its CJK runs. The stored text has the markup
    the sentence lost, somewhere; one piece at least lies outside it."""
    words = sorted(set(_LONG_WORD.findall(sentence)), key=len, reverse=True)[:3]
    runs = sorted(_CJK_RUN.findall(sentence), key=len, reverse=True)[:2]
    return words + [run[i : i + 4] for run in runs for i in sorted({0, (len(run) - 4) // 2, len(run) - 4})]


EXTRACT_SYSTEM = """You extract durable knowledge about a software project from an AI coding session.
Two kinds of facts, held to different sources:
1. Standing rules, decisions, conventions and preferences (category rule, decision, convention,
   preference). Only what the USER said, in their own words, as a lasting instruction for how to
   work on this project ("always run ruff before committing", "never push to main", "we deploy
   with fly.io", "use pnpm, not npm"). Give its source in "quote": the user's exact words, copied
   from a user prompt. Never take one from: text the user pasted (bug reports, issues, logs,
   stack traces, documents, transcripts); Claude Code's own text (caveats, <command-name>
   wrappers, hook feedback, skill bodies, system reminders, summaries of earlier conversation);
   tool output; the assistant's messages; a fragment. A request for the task at hand ("fix the
   login bug", "use the second option", "don't commit yet") is not a standing rule, and nor is a
   reply that picks among options Claude offered, unless it says it should last.
2. Other facts (category bugfix, configuration, other): what the session established about the
   project, in the project's terms: the root cause of a bug and its fix, where something lives,
   how something works, a dependency or configuration. Never the agent narrating its own process
   ("the tests were run", "the Debugger identified the function", "the issue was reproduced"),
   never that a file was created, edited or read, never plans or next steps.
Do not extract guesses, feelings, transient state, secrets, or anything phrased as a question.
Give each fact a confidence between 0 and 1: 0.9 or more only when the material states it
plainly; 0.7-0.9 when it is inferred; below 0.7 when uncertain. `subject` names what the fact is
about in two to five words (e.g. "deployment"). Write each fact in the language the user wrote it
in. When nothing qualifies, reply with an empty list: most sessions give no standing rule.
Reply with JSON only: {"facts": [{"text": str, "confidence": number, "subject": str, "category":
"rule"|"decision"|"bugfix"|"convention"|"configuration"|"preference"|"other", "quote": str|null}]}"""

DECIDE_SYSTEM = """You manage the fact memory of a software project. For each candidate fact you see
the most similar existing facts, each with a number. Decide one event per candidate:
- "ADD": it is new information;
- "UPDATE": it replaces or refines existing fact `target` (give the merged text in `text`);
- "DELETE": it shows that existing fact `target` is no longer true;
- "NONE": it is already known (same meaning as an existing fact).
A merged `text` keeps the language the facts are written in.
Reply with JSON only: {"decisions": [{"candidate": int, "event": "ADD"|"UPDATE"|"DELETE"|"NONE",
"target": int|null, "text": str|null, "reason": str}]}"""


@dataclass
class Material:
    """What to extract from, and where the facts go."""

    source: str  # prompt | observation | summary | transcript | messages
    text: str = ""
    observations: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[Prompt | str] = field(default_factory=list)  # the session's typed prompts (summary material)
    root_causes: list[str] = field(default_factory=list)  # a session's outcome, already read (local path)
    project: str = ""
    agent_id: str | None = None
    session_id: str | None = None
    branch: str = MAIN
    source_id: str | None = None
    observed_at: float | None = None
    answers_a_question: bool = False  # `text` (a prompt) replies to a question Claude asked
    local_only: bool = False  # never ask Claude (imported history, unless the user asked for Claude)

    def user_prompts(self) -> list[Prompt]:
        """What the user typed in this material: the only source a standing rule may have."""
        out = [p if isinstance(p, Prompt) else Prompt(p) for p in self.prompts]
        if self.source == "prompt" and self.text:
            out.insert(0, Prompt(self.text, self.answers_a_question))
        elif self.source == "messages":  # mem0 messages: the user's role, one message a line
            out += [Prompt(line.split(":", 1)[1].strip()) for line in self.text.splitlines() if line.startswith("user:")]
        return out


@dataclass
class Candidate:
    text: str
    confidence: float
    subject: str | None = None
    category: str | None = None
    similar: list[dict[str, Any]] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)  # terms an earlier rule said that this one drops
    quote: str | None = None  # the user's words a standing rule stands on (Claude gives them)
    decision: FactDecision | None = None
    decided_by: str = "local"
    numbered: dict[int, dict[str, Any]] = field(default_factory=dict)  # the model's numbers → existing facts


class FactExtractor:
    def __init__(self, db: Database, facts: FactStore, conflicts: ConflictService, llm=None, redact=None, policy=None):
        self.db = db
        self.facts = facts
        self.conflicts = conflicts
        self.llm = llm  # a callable returning the Claude client (built lazily), or None
        self._redact = redact or (lambda text: text)
        self.policy = policy  # AgentPolicy: read-only agents' writes become proposals

    # --- entry point -----------------------------------------------------------------

    def extract(self, material: Material) -> ExtractionOutcome:
        client = None if material.local_only else self._client()
        if client is not None:
            outcome = self._with_claude(client, material)
            if outcome is not None:
                return outcome
            errors = ["the model's extraction reply was unusable; used the local path"]
        else:
            errors = []
        candidates = self._local_candidates(material)
        for candidate in candidates:
            candidate.similar = self._similar(candidate.text, material)
            candidate.decision = self._local_decision(0, candidate)
            if candidate.decision.event == "ADD" and candidate.category in STANDING:
                self._local_supersede(candidate, material)
        outcome = self._apply(material, candidates, mode="local")
        outcome.errors = errors + outcome.errors
        return outcome

    # --- Claude ----------------------------------------------------------------------------

    def _client(self):
        try:
            client = self.llm() if callable(self.llm) else self.llm
            return client if client is not None and bool(getattr(client, "available", False)) else None
        except Exception:
            log.warning("the Claude client is not usable; extracting locally", exc_info=True)
            return None

    def _with_claude(self, client, material: Material) -> ExtractionOutcome | None:
        """None when the extraction reply is unusable (the caller goes local)."""
        prompt = self._material_prompt(material)
        if not prompt.strip():
            return ExtractionOutcome(mode="claude")
        reply = self._ask(client, EXTRACT_SYSTEM, prompt, ExtractionReply)
        if reply is None:
            return None
        candidates = [Candidate(f.text.strip(), f.confidence, f.subject, f.category, quote=f.quote)
                      for f in reply.facts if f.text.strip()]  # fmt: skip
        numbered: list[dict[str, Any]] = []  # existing facts as the model sees them: index = number
        for candidate in candidates:
            candidate.similar = self._similar(candidate.text, material)
            for fact in candidate.similar:
                if all(n["id"] != fact["id"] for n in numbered):
                    numbered.append(fact)
        errors: list[str] = []
        if numbered:
            decisions = self._ask(client, DECIDE_SYSTEM, self._decision_prompt(candidates, numbered), DecisionReply)
            if decisions is None:
                errors.append("the model's decision reply was unusable; decided locally")
            for index, candidate in enumerate(candidates):
                candidate.numbered = dict(enumerate(numbered))
                candidate.decision = self._checked(decisions, index, candidate, numbered)
                candidate.decided_by = "claude" if candidate.decision is not None else "local"
                if candidate.decision is None:
                    candidate.decision = self._local_decision(index, candidate)
        else:
            for index, candidate in enumerate(candidates):
                candidate.decision = FactDecision(candidate=index, event="ADD", reason="no similar fact")
                candidate.decided_by = "claude"
        outcome = self._apply(material, candidates, mode="claude")
        outcome.errors = errors + outcome.errors
        return outcome

    def _ask(self, client, system: str, prompt: str, model):
        try:
            raw = client.complete_json(system, prompt, max_tokens=1500)
        except Exception as exc:
            log.warning("Claude call for fact extraction failed: %s", exc)
            return None
        if isinstance(raw, (str, bytes)):
            try:
                raw = json.loads(raw)
            except (TypeError, ValueError):
                log.warning("Claude replied with something that is not JSON")
                return None
        if isinstance(raw, list) and model is ExtractionReply:
            raw = {"facts": raw}
        if isinstance(raw, list) and model is DecisionReply:
            raw = {"decisions": raw}
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            log.warning("Claude's reply does not match %s: %s", model.__name__, exc.errors()[:3])
            return None

    @staticmethod
    def _checked(reply: DecisionReply | None, index: int, candidate: Candidate, numbered: list[dict[str, Any]]):
        """The model's decision for a candidate if it is coherent, else None."""
        if reply is None:
            return None
        mine = [d for d in reply.decisions if d.candidate == index]
        if len(mine) != 1:
            return None
        decision = mine[0]
        if decision.event in ("UPDATE", "DELETE"):
            if decision.target is None or not 0 <= decision.target < len(numbered):
                return None
            target_id = numbered[decision.target]["id"]
            if all(s["id"] != target_id for s in candidate.similar):
                return None  # the model may only touch facts it was shown for this candidate
        return decision

    def _material_prompt(self, material: Material) -> str:
        parts = [f"User prompt{' (a reply to a question Claude asked)' if p.answers_a_question else ''}: {p.text}"
                 for p in material.user_prompts()[-30:] if material.source != "prompt" or p.text != material.text]  # fmt: skip
        for obs in material.observations:
            parts.append(f"- [{_obs_type(obs)}] {_obs_summary(obs)}")
            for extra in (_obs_data(obs).get("facts") or [])[:5]:
                parts.append(f"    fact: {extra}")
        body = "\n".join(parts)
        if material.text:
            body = (body + "\n\n" if body else "") + material.text
        body = self._redact(body)
        if len(body) > MAX_MATERIAL_CHARS:  # keep the end: the latest part of a transcript matters most
            body = "[...]\n" + body[-MAX_MATERIAL_CHARS:]
        return f"Source: {material.source}\n\n{body}" if body.strip() else ""

    @staticmethod
    def _decision_prompt(candidates: list[Candidate], numbered: list[dict[str, Any]]) -> str:
        lines = ["Existing facts:"]
        lines += [f"{i}. {fact['text']}" for i, fact in enumerate(numbered)]
        lines.append("\nCandidates:")
        for index, candidate in enumerate(candidates):
            similar = [str(i) for i, f in enumerate(numbered) if any(s["id"] == f["id"] for s in candidate.similar)]
            lines.append(f"{index}. {candidate.text} (similar existing: {', '.join(similar) or 'none'})")
        return "\n".join(lines)

    # --- local -------------------------------------------------------------------------------

    def _local_candidates(self, material: Material) -> list[Candidate]:
        out = []
        for prompt in material.user_prompts() if material.source != "messages" else []:
            for statement in standing_statements(prompt.text, answers_a_question=prompt.answers_a_question):
                if len(prompt.text) > OWN_PARAGRAPH and self._claude_said(statement.text, material):
                    continue  # Claude's words pasted back (another session's analysis, a plan): not the user's
                out.append(Candidate(statement.text, statement.confidence, None, CATEGORY_OF[statement.kind],
                                     replaces=statement.replaces))  # fmt: skip
            for ban in bans(prompt.text):
                if self._said_again(ban, prompt.text, material):  # the user needed to say it twice: it lasts
                    out.append(Candidate(ban.text, USUAL, None, "rule"))
        for cause in material.root_causes:  # stated by Claude's last message: plain, not inferred
            out.append(Candidate(cause, ROOT_CAUSE_CONFIDENCE, None, "bugfix"))
        for obs in material.observations:
            kind = _obs_type(obs)
            if TYPE_TO_LAYER.get(kind) != "verified_fact" or _captured(obs):
                continue
            text = _obs_summary(obs)
            if text:
                confidence = float(_obs_data(obs).get("confidence") or LOCAL_CONFIDENCE)
                # An agent's own decision is a design choice on record, never a standing rule (only the user gives those).
                out.append(Candidate(text, confidence, None, AGENT_CATEGORY.get(kind, kind)))
        return out

    @staticmethod
    def _local_decision(index: int, candidate: Candidate) -> FactDecision:
        best = max(candidate.similar, key=lambda f: f["similarity"], default=None)
        if best is not None and best["similarity"] >= NEAR_DUPLICATE:
            return FactDecision(candidate=index, event="NONE", reason=f"near-duplicate of {best['id']} ({best['similarity']:.2f})")
        return FactDecision(candidate=index, event="ADD", reason="new")

    def _local_supersede(self, candidate: Candidate, material: Material) -> None:
        """A new rule or decision that drops what an earlier one said becomes its UPDATE.

        "We deploy with render instead of fly.io" updates the rule that names
        fly.io; "from now on …" updates a rule on the same subject (similar
        words) without naming what it replaces.
        """
        found = list(candidate.similar)
        for term in candidate.replaces:
            found += [f for f in self._similar(term, material) if all(f["id"] != x["id"] for x in found)]
        standing = [f for f in found if (f.get("type") or f.get("category")) in STANDING]
        target = next((f for f in standing for term in candidate.replaces if term.lower() in f["text"].lower()), None)
        if target is None and _CHANGE_OF_MIND.search(candidate.text):
            target = next((f for f in standing if f["similarity"] >= SAME_SUBJECT), None)
        if target is None:
            return
        candidate.similar = [target] + [f for f in candidate.similar if f["id"] != target["id"]]
        candidate.numbered = {0: target}
        candidate.decision = FactDecision(candidate=0, event="UPDATE", target=0, text=candidate.text,
                                          reason=f"replaces {target['id']}: {target['text'][:80]}")  # fmt: skip

    def _claude_said(self, sentence: str, material: Material) -> bool:
        """Whether Claude said `sentence` before in this project, as its words stand (markup and spacing
        aside). Asked only of a prompt long enough to hold a paste: a user who agrees in a short reply
        may well repeat Claude's words, and then they are the user's too."""
        said = _plain(sentence)
        if len(said) < MIN_PASTED_CHARS or not material.project:
            return False
        conn = self.db.reader()
        try:
            texts = {t for piece in _lookup_pieces(sentence) for t in claude_texts_containing(conn, material.project, piece)}
            return any(said in _plain(text) for text in texts)
        except Exception:
            log.warning("looking up Claude's earlier words failed", exc_info=True)
            return False

    def _said_again(self, ban: Ban, prompt: str, material: Material) -> bool:
        """Whether the user banned the same thing in another session of the project, in a prompt of its
        own: a resumed session starts with copies of the earlier one's prompts, and those are not the
        user saying it again."""
        if not material.project or not material.session_id:
            return False
        try:
            rows = prompts_containing(self.db.reader(), material.project, max(ban.objects, key=len))
        except Exception:
            log.warning("looking up the user's earlier prompts failed", exc_info=True)
            return False
        here = {as_said(prompt)} | {as_said(r["text"]) for r in rows if r["session_id"] == material.session_id}
        return any(r["session_id"] != material.session_id and as_said(r["text"]) not in here and typed_by_person(r)
                   and any(ban.same_as(other) for other in bans(r["text"])) for r in rows)  # fmt: skip

    def _similar(self, text: str, material: Material) -> list[dict[str, Any]]:
        conn = self.db.reader()
        try:
            view = resolve_view(conn, material.branch)
            return self.facts.similar(text, view, project=material.project, limit=SIMILAR_PER_CANDIDATE, conn=conn)
        except Exception:
            log.warning("similar-fact lookup failed", exc_info=True)
            return []

    # --- applying decisions ----------------------------------------------------------------------

    def _apply(self, material: Material, candidates: list[Candidate], *, mode: str) -> ExtractionOutcome:
        outcome = ExtractionOutcome(mode=mode)  # type: ignore[arg-type]
        if not candidates:
            return outcome
        agent_id = material.agent_id or DEFAULT_AGENT
        actor = agent_actor(agent_id)
        observed_at = material.observed_at or now()
        read_only = bool(self.policy and self.policy.is_read_only(agent_id))
        with self.db.transaction() as conn:
            for candidate in candidates:
                try:
                    result = self._apply_one(conn, material, candidate, actor, agent_id, observed_at, read_only)
                except Exception as exc:  # one bad candidate must not lose the others
                    log.exception("applying a fact decision failed")
                    outcome.errors.append(f"{candidate.text[:60]!r}: {exc}")
                    continue
                if result.get("event") == "REJECTED":
                    outcome.rejected += 1
                outcome.results.append(result)
        return outcome

    def _apply_one(self, conn, material, candidate: Candidate, actor, agent_id, observed_at, read_only) -> dict[str, Any]:
        decision = candidate.decision or FactDecision(candidate=0, event="ADD")
        if decision.event != "NONE":
            verdict = check(candidate.text, candidate.category, candidate.confidence, candidate.quote, material.user_prompts())
            if not verdict.allowed:
                self.facts.log_rejection(conn, candidate.text, candidate.confidence, project=material.project,
                                         agent_id=agent_id, source=material.source, reason=verdict.reason)  # fmt: skip
                return {"id": None, "memory": candidate.text, "event": "REJECTED", "status": "rejected",
                        "reason": verdict.reason}  # fmt: skip
            if verdict.confidence is not None:
                candidate.confidence = verdict.confidence
            if verdict.source:
                candidate.quote = verdict.source  # kept with the fact: the user's sentence it stands on
        target = None
        if decision.target is not None and decision.event in ("UPDATE", "DELETE"):
            target = candidate.numbered.get(decision.target)
        if decision.event == "ADD" and (newer := _replaced_later(candidate, observed_at)) is not None:
            # what a later rule says it replaced ("… instead of black"), said before it: that rule's older version
            decision, target = FactDecision(candidate=0, event="UPDATE", reason=f"replaced later by {newer['id']}"), newer
        if decision.event == "NONE" and candidate.similar:
            target = max(candidate.similar, key=lambda f: f["similarity"])
        reason = f"{decision.event} ({candidate.decided_by}): {decision.reason or ''}".strip()
        if read_only and decision.event != "NONE":
            return self.policy.propose(conn, "fact_decision", {
                "text": candidate.text, "confidence": candidate.confidence, "subject": candidate.subject,
                "category": candidate.category, "event": decision.event, "target_id": target["id"] if target else None,
                "new_text": decision.text, "project": material.project, "branch": material.branch,
                "source_id": material.source_id, "reason": reason,
            }, agent_id=agent_id, project=material.project, branch=material.branch, session_id=material.session_id)  # fmt: skip
        return self.apply_decision(
            conn, event=decision.event, text=candidate.text, confidence=candidate.confidence, subject=candidate.subject,
            category=candidate.category, target=target, new_text=decision.text, project=material.project,
            branch=material.branch, agent_id=agent_id, actor=actor, session_id=material.session_id,
            source_id=material.source_id, source=material.source, observed_at=observed_at, reason=reason,
            quote=candidate.quote,
        )  # fmt: skip

    def apply_decision(self, conn, *, event: str, text: str, confidence: float, subject: str | None, category: str | None,
                       target: dict[str, Any] | None, new_text: str | None, project: str, branch: str, agent_id: str,
                       actor: str, session_id: str | None, source_id: str | None, source: str, observed_at: float,
                       reason: str, quote: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Carry out one ADD/UPDATE/DELETE/NONE under the confidence and conflict rules."""
        if event in ("ADD", "UPDATE") and (gone := self.facts.forgotten.find(conn, project, "fact", text, new_text, branch=branch)):
            return {"id": None, "memory": text, "event": "NONE", "status": "forgotten", "forgotten_id": gone["id"]}
        if event == "NONE":
            return {"id": target["id"] if target else None, "memory": text, "event": "NONE"}
        fact = FactIn(text=text, confidence=confidence, subject=subject, category=category, project=project,
                      agent_id=agent_id, session_id=session_id, source="prompt" if source == "prompt" else "ai",
                      source_id=source_id, branch=branch, quote=quote)  # fmt: skip
        if event == "ADD" or target is None:
            stored = self.facts.add(fact, actor=actor, conn=conn, stated_at=observed_at,
                                    reason=reason if event == "ADD" else f"ADD (no valid target): {reason}")  # fmt: skip
            if stored["status"] == "rejected":
                return {"id": None, "memory": text, "event": "REJECTED", "status": "rejected"}
            if stored.get("reaffirmed"):  # the pending fact that says it already: one approval settles both
                return {"id": stored["record"]["id"], "memory": text, "event": "NONE", "status": stored["status"],
                        "reaffirmed": True, **({"confirmed": True} if stored.get("confirmed") else {})}  # fmt: skip
            return {"id": stored["record"]["id"], "memory": text, "event": "ADD", "status": stored["status"]}
        # UPDATE / DELETE of an existing fact
        current = Records.get(conn, target["id"], resolve_view(conn, branch))
        if current is None or current["status"] != "active":
            return {"id": target["id"], "memory": text, "event": "NONE", "status": "target gone"}
        if confidence < FACT_PENDING:
            self.facts.log_rejection(conn, text, confidence, project=project, agent_id=agent_id, source=source,
                                     reason=f"{event} of {current['id']} with confidence {confidence:.2f}")  # fmt: skip
            return {"id": current["id"], "memory": text, "event": "REJECTED", "status": "rejected"}
        if said_before(current, observed_at):  # old history imported after the fact: it cannot replace it
            kept = self.facts.keep_superseded(conn, fact, current, actor=actor, stated_at=observed_at,
                                              reason=f"SUPERSEDED by {current['id']}, said later ({reason})")  # fmt: skip
            return {"id": kept["id"], "memory": text, "event": "NONE", "status": "superseded", "superseded_by": current["id"]}
        why_not = settle(current, confidence=confidence, observed_at=observed_at, actor=actor)
        if why_not is not None:
            opened = self.conflicts.open(conn, current, new_text or text, confidence=confidence, reason=f"{event}: {why_not}",
                                         actor=actor, agent_id=agent_id, branch=branch, source_id=source_id)  # fmt: skip
            return {"id": current["id"], "memory": text, "event": "CONFLICT", "conflict_id": opened["conflict_id"],
                    "candidate_id": opened["candidate"]["id"], "status": "disputed"}  # fmt: skip
        if event == "UPDATE":
            record = self.facts.supersede(conn, current["id"], new_text or text, confidence=confidence, actor=actor,
                                          reason=reason, branch=branch, source_id=source_id, stated_at=observed_at)  # fmt: skip
            return {"id": record["id"], "memory": record["text"], "event": "UPDATE", "previous_memory": current["text"], "status": "active"}
        self.facts.invalidate(conn, current["id"], actor=actor, reason=reason, branch=branch)
        return {"id": current["id"], "memory": current["text"], "event": "DELETE", "status": "invalidated"}


def _replaced_later(candidate: Candidate, said_at: float) -> dict[str, Any] | None:
    """The standing rule or decision, said after `said_at`, that names what `candidate` (a standing
    statement too) says as what it replaces: "we use black" before "ruff format instead of black"."""
    if candidate.category not in STANDING:
        return None
    for fact in candidate.similar:
        if (fact.get("type") or fact.get("category")) not in STANDING or not said_before(fact, said_at):
            continue
        if any(re.search(rf"(?<!\w){re.escape(term)}(?!\w)", candidate.text, re.I) for term in replaced_terms(fact["text"])):
            return fact
    return None


def _obs_data(obs: dict[str, Any]) -> dict[str, Any]:
    data = obs.get("data")
    return data if isinstance(data, dict) else obs


def _obs_type(obs: dict[str, Any]) -> str:
    return str(obs.get("type") or _obs_data(obs).get("type") or "note")


def _obs_summary(obs: dict[str, Any]) -> str:
    data = _obs_data(obs)
    return str(data.get("summary") or obs.get("summary") or obs.get("title") or data.get("title") or obs.get("text") or "").strip()


def _captured(obs: dict[str, Any]) -> bool:
    """A tool use captured by a hook (not an observation an agent wrote on purpose)."""
    tool = str(obs.get("tool_name") or _obs_data(obs).get("tool_name") or "")
    return bool(obs.get("tool_use_id") or _obs_data(obs).get("tool_use_id") or tool in CAPTURED_TOOLS
                or tool.startswith("mcp__"))  # fmt: skip
