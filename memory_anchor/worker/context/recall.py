"""Per-prompt recall: the few memories worth adding to what the user just asked.

Each line carries the answer, not a title: a test run with its verdict and the
failing assertion, a search with the files it found, a session with its outcome,
a rule as stated. The same thing said twice (the same test run three times)
is one line. Standing rules and decisions come first when the prompt touches
their subject ("how do we deploy the shop?" recalls "we deploy with fly.io"),
matched on words (CJK by character pairs), not on the search score.
Claude's replies of earlier sessions (an explanation, the reason for a choice,
what failed), and what the user told Claude when it asked (a path, a setting,
a choice), are recalled like any memory. A memory is added only when it is
close to the prompt (`holds_an_answer`; for a prompt in a CJK script, when it says
most of the prompt's subject: `subject_said`): recall stays quiet when memory holds
nothing on the subject.
"""

from __future__ import annotations

import re
from typing import Any

from memory_anchor.schemas.events import RecallRequest
from memory_anchor.schemas.memory_model import STANDING
from memory_anchor.worker.context.knowledge import LABELS
from memory_anchor.worker.context.layers import standing_facts
from memory_anchor.worker.context.model import ContextServices
from memory_anchor.worker.context.sessions import activity_text, outcome_line
from memory_anchor.worker.context.staleness import mark, marks
from memory_anchor.worker.memory.cues import share_said, subject_terms, subject_words, terms
from memory_anchor.worker.memory.instructions import is_question
from memory_anchor.worker.memory.text import ELLIPSIS, clip, line_key, one_line
from memory_anchor.worker.memory.user_words import subject
from memory_anchor.worker.store.cjk import written_in_cjk
from memory_anchor.worker.store.present import record_to_wire
from memory_anchor.worker.store.records import Records, resolve_view

RECALL_KINDS = ["observation", "summary", "fact", "event", "memory", "transcript", "prompt"]
AGREED = 0.40  # the least cosine a hit whose words the prompt shares may have (see holds_an_answer)
QUESTION_EXTRA = 4  # lines a question gets beyond the limit: what it asks may be said in a few places (see docs)
MAX_RULES = 3
MAX_SESSIONS = 2
SUBJECT_NAMED = 0.75  # of a session's subject words, in the prompt: the prompt names that session
SUBJECT_SAID = 0.5  # of a CJK prompt's subject, in a memory: it says half of it or more (see subject_said)
LINE_CHARS = 300
COMMAND_CHARS = 200  # a command Claude ran, in full as far as a line allows: how it was done is often the answer
SESSION_LINE_CHARS = 420
ASKED_CHARS = 120  # of what the user asked that a recalled reply of Claude's answered
SESSION_PATH_CHARS = 160  # a file a recalled session changed, by its whole path: Claude may open it


def recall_for_prompt(services: ContextServices, request: RecallRequest, *, project: str | None,
                      branch: str | None = None) -> dict[str, Any]:  # fmt: skip
    """`project`: the request's, or its cwd's; `branch`: the session's, when it is known."""
    settings = services.settings
    if not settings.prompt_recall or len(request.prompt.split()) < 3 and len(terms(request.prompt)) < 3:
        return {"context": "", "results": []}
    conn = services.reader()
    view = resolve_view(conn, branch or settings.default_branch)
    rules = [f for f in matching_rules(conn, view, project, request.prompt)
             if not request.session_id or f.get("session_id") != request.session_id]  # in this session's context already
    sessions = named_sessions(services, view, project, request.prompt, besides=request.session_id)
    question = asks(request.prompt)
    wanted = terms(request.prompt)
    limit = settings.prompt_recall_limit + (QUESTION_EXTRA if question else 0)
    hits = services.search().search(
        request.prompt,
        view,
        filters={"project": project or None, "kind": RECALL_KINDS},
        top_k=limit * 4,  # room for the repeats and the prompts dropped below
        mode="hybrid",
        fallback=False,
        # A tool call is recalled only once its meaning is judged, about 9 ms of embedding each. A
        # question about the project's past is worth it (on brain's 25, recall answered 18 instead
        # of 14); a task, most prompts, would pay up to 70 ms each for lines that rarely help it.
        score_unembedded=question,
    )
    if written_in_cjk(request.prompt):
        hits = subject_said(hits, request.prompt)
    else:
        hits = [h for h in hits if holds_an_answer(h, settings.prompt_recall_threshold, wanted)]
    # Of the user's prompts, only what they told Claude when it asked (a path, a setting, a choice): other
    # prompts are requests, and one in the question's words (this one, just captured) is no answer.
    hits = [h for h in hits if h["kind"] != "prompt" or told_when_asked(h) and h.get("session_id") != request.session_id]
    forgotten = getattr(getattr(services, "memory", None), "forgotten", None)
    if forgotten is not None and project:  # a session's line without what the user has forgotten since
        sessions = [forgotten.scrub_outcome(conn, project, s, view) for s in sessions]
        hits = [forgotten.scrub_outcome(conn, project, h, view) if h["kind"] == "summary" else h for h in hits]
    # Checked against the code as they are shown: a memory whose files changed since says so.
    found = marks(services, rules + sessions + hits, project, request.session_id)
    lines, results, seen = [], [], set()
    for record in rules + sessions + hits:
        line = recall_line(record, wanted)
        key = line_key(line)
        if record["id"] in seen or key in seen:
            continue
        seen.update((record["id"], key))
        lines.append(f"- {line}{mark(found.get(record['id']))} (id {record['id']})")
        results.append(record)
        if len(results) >= len(rules) + len(sessions) + limit:
            break
    if not lines:
        return {"context": "", "results": []}
    context = "\n".join(["Memory Anchor recalls (from earlier work on this project):", *lines])
    return {"context": context, "results": [record_to_wire(r) for r in results]}


def asks(prompt: str) -> bool:
    """A question (a question mark in any script, or a question's words): it gets a few more lines
    than a task does, and its tool calls are judged by meaning (see `recall_for_prompt`)."""
    return "?" in prompt or "？" in prompt or is_question(prompt)


def told_when_asked(record: dict[str, Any]) -> bool:
    """A prompt that replied to a question Claude asked: what the user told it then."""
    return bool((record.get("data") or {}).get("answers_a_question"))


def holds_an_answer(hit: dict[str, Any], threshold: float, wanted: set[str] = frozenset()) -> bool:
    """Whether a hit is close enough to the prompt to be worth its line.

    Meaning alone decides at `threshold` (the dense side's cosine); lower, down to AGREED, only when
    the prompt's words are in it too (found by both sides), two of them at least (`wanted`: the
    prompt's terms): a shared word is no answer ("the backend" in a question about billing, "Used
    PowerShell → migrations" for a question about a CRM's migration), unless it is a name (`names`). A
    hit found by its words alone never is. Measured on real sessions' questions, those whose answer
    memory lacks reached 0.40 at most."""
    similarity = hit.get("similarity")
    if similarity is None:
        return False
    if similarity >= threshold:
        return True
    if similarity < AGREED or "keyword" not in str(hit.get("match") or ""):
        return False
    shared = wanted & terms(f"{hit.get('title') or ''} {hit.get('text') or ''}")
    return not wanted or len(shared) >= 2 or names(shared)


_NAME_MARK = re.compile(r"[._/\\-]|\d")


def names(shared: set[str]) -> bool:
    """Whether words a prompt shares with a memory include a name: a file, a path, a version, a
    snake_case or dashed name ("CLAUDE.md", "v4-flash", "lib/hosts"). A name is one thing, and enough."""
    return any(_NAME_MARK.search(term) for term in shared)


def subject_said(hits: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """The hits that say most of a CJK prompt's subject, those that say more first.

    The embedding model reads English: on CJK text its similarity says little (an unrelated Chinese
    memory scores 0.78 against a question, above what a related English one does), so for a prompt
    in a CJK script the words decide. Measured on a real Chinese project's questions and on the
    same absent questions asked in Chinese, the similarity gate injected five unrelated lines for
    each absent one and missed most answers that search found. A memory that says half the subject
    is kept (SUBJECT_SAID): on the same person's later sessions, asking for most of it answered 5 of
    20 questions, half of it 10, with 9 of 10 absent questions in Chinese still quiet."""
    wanted = subject_terms(prompt)
    said = [(share_said(wanted, f"{h.get('title') or ''}\n{h.get('text') or ''}"), n, h) for n, h in enumerate(hits)]
    return [h for share, _, h in sorted(said, key=lambda t: (-t[0], t[1])) if share >= SUBJECT_SAID]


def recall_line(record: dict[str, Any], wanted: set[str] = frozenset()) -> str:
    """A memory as one line; of a long reply or prompt, the part that says most of `wanted` (the prompt's terms)."""
    kind = record["kind"]
    if kind == "fact" and (record.get("type") or "") in STANDING:
        return f"[{LABELS[record['type']]}] {clip(record['text'], LINE_CHARS)}"
    if kind == "observation":  # what was done, then of what came of it the part the prompt asks about
        done, arrow, came = activity_text(record, command_chars=COMMAND_CHARS).partition(" → ")
        if arrow and len(done) + len(arrow) + len(came) > LINE_CHARS:
            done = clip(done, LINE_CHARS // 2)
            came = excerpt(came, wanted, LINE_CHARS - len(done) - len(arrow))
        return f"[{record.get('type') or 'observation'}] {clip(done + arrow + came, LINE_CHARS)}"
    if kind == "summary":  # a session says more: what was asked, why it broke, what changed
        return "[session] " + clip(outcome_line(record, path_chars=SESSION_PATH_CHARS)[2:], SESSION_LINE_CHARS)
    if kind == "transcript":  # Claude's own words in an earlier session: an explanation, a reason, what failed
        # with what it replied to: the user's own words there often hold the answer ("it's behind the webBackfillLoad flag")
        title = str(record.get("title") or "")
        to = f' to "{clip(title[4:], ASKED_CHARS)}"' if title.startswith("Re: ") and title[4:].strip() else ""
        return f"[claude said{to}] {excerpt(record.get('text') or '', wanted, SESSION_LINE_CHARS)}"
    if kind == "prompt":  # the user's own words, when Claude asked
        return f"[user said] {excerpt(record.get('text') or '', wanted, SESSION_LINE_CHARS)}"
    return f"[{kind}] {clip(record.get('text') or record.get('title') or '', LINE_CHARS)}"


_SENTENCE_START = re.compile(r"(?<=[.!?;。！？；])\s+(?=\S)|(?<=[。！？；])(?=\S)|\s+(?=[-*•]\s|\d+[.)]\s)")


def excerpt(text: str, wanted: set[str], limit: int) -> str:
    """`text` clipped to `limit`, from the first sentence from which the most of `wanted` fits in it.

    A reply of an earlier session often answers in its middle ("…Here's what I found: the
    root cause is …"); its first `limit` characters would keep the preamble and cut the answer.
    The opening is kept unless a later start says more of what the prompt asks."""
    flat = one_line(text)
    if len(flat) <= limit or not wanted:
        return clip(flat, limit)
    room = limit - len(ELLIPSIS)
    best, said = 0, len(wanted & terms(flat[:limit]))
    for start in (m.end() for m in _SENTENCE_START.finditer(flat)):
        here = len(wanted & terms(flat[start : start + room]))
        if here > said:  # the first start that shows more: as much of what leads to it as fits
            best, said = start, here
    return clip(flat, limit) if best == 0 else ELLIPSIS + clip(flat[best:], room)


def named_sessions(services: ContextServices, view, project: str | None, prompt: str,
                   besides: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Earlier sessions the prompt names by what was asked in them ("how did we fix <that issue's title>?").

    Found by keywords, kept only when the prompt holds most of one thing the session was asked: its
    first request, a later one its summary lists, or any prompt of it (a session's summary lists
    only its first few). Naming a task is a stronger signal than any similarity score, so such a
    session comes first whatever its score, shown by its latest summary (what it changed, found
    and left) with the request the prompt named. `besides`: the asking session, whose outcome is in its context."""
    if not project:
        return []
    hits = services.search().search(prompt, view, filters={"project": project, "kind": ["summary", "prompt"]},
                                  top_k=MAX_SESSIONS * 4, mode="keyword", fallback=False)  # fmt: skip
    wanted = terms(prompt)
    named: dict[str, dict[str, Any]] = {}
    for hit in hits:
        session = hit.get("session_id")
        if not session or session in named or session == besides:
            continue
        asked = _asked_in(hit)
        request = next((a for a in asked if _names(terms(a), wanted)), None)
        if request is None:
            continue
        # The session's last summary holds all it did; a hit may be an earlier Stop's.
        summary = _latest_summary(services.reader(), view, project, session)
        if summary is not None:
            named[session] = _naming(summary, request)
        if len(named) == MAX_SESSIONS:
            break
    return list(named.values())


def _asked_in(hit: dict[str, Any]) -> list[str]:
    """What a summary says its session was asked, or what a prompt asks."""
    if hit["kind"] == "summary":
        request = str((hit.get("data") or {}).get("request") or "")
        return [part.strip() for part in request.replace(" | then: ", " | ").split(" | ") if part.strip()]
    return [subject(hit.get("text") or "", 200)]


def _names(asked: set[str], wanted: set[str]) -> bool:
    return len(asked) >= 3 and len(asked & wanted) / len(asked) >= SUBJECT_NAMED


def _latest_summary(conn, view, project: str, session: str) -> dict[str, Any] | None:
    found = Records.latest(conn, view, filters={"kind": "summary", "project": project, "session_id": session}, limit=1)
    return found[0] if found else None


def _naming(summary: dict[str, Any], request: str) -> dict[str, Any]:
    """The session's summary, its line led by the request the prompt named (a later one, maybe)."""
    data = summary.get("data") or {}
    if str(data.get("request") or "").startswith(request):
        return summary
    return {**summary, "data": {**data, "request": request}}


def matching_rules(conn, view, project: str | None, prompt: str) -> list[dict[str, Any]]:
    """The standing rules and decisions about what the prompt is about, most shared words first.

    A rule matches when it shares two of the prompt's words, a name ("CLAUDE.md", "v4-flash": one
    thing, and enough), or a quarter of what the prompt is about ("format" in "how should I format the
    code before committing?"). One word of a longer prompt is a coincidence, as for any recalled line:
    "stop" made "stop making changes without checking with me" the answer to why push notifications
    stopped arriving, and "state" a home-manager preference the answer to where terraform state is kept.
    """
    wanted = {term for term in terms(prompt) if len(term) > 2 or not term.isascii()}  # not "s", "de", "le"
    if not wanted or not project:
        return []
    # What a CJK prompt is about: its words, each a run cut at its grammar (its other pairs span two
    # words, and two of them, "的时" and "时候", are one "…的时候" that any two sentences share).
    about = subject_words(prompt) if written_in_cjk(prompt) else [{term} for term in wanted]
    scored = []
    for fact in standing_facts(conn, view, project):
        said = terms(fact["text"])
        shared = [word for word in about if word & said]
        common = set().union(*shared)
        if len(shared) >= 2 or names(common) or shared and 4 * len(shared) >= len(about):
            scored.append((len(common), fact["seq"], fact))
    scored.sort(key=lambda t: (-t[0], -t[1]))
    return [fact for _, _, fact in scored[:MAX_RULES]]
