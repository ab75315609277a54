"""What a person said is wrong, kept so that re-extraction cannot bring it back.

Each row of table `forgotten` (migration 0103 on SQLite, 0011 on PostgreSQL) is
one correction: a fact (rule, decision, preference, root cause, ...) or an open
next step that was forgotten, or the wording an edit replaced, with who, when
and why. Rows are never changed or removed.

`find` is the one check: extraction asks it before it writes a fact
(extraction.py, facts.py) and the open items before they open a next step
(open_items.py). A candidate is the forgotten item again when it says the same
thing: the same words once normalised, or a wording as close as the place
treats as a repeat elsewhere (a near-duplicate fact, a restated next step). So
the same prompt posted again, a re-import of the same history, a later session
restating the step or Claude proposing it again all find it forgotten.

A candidate that names other specifics is another statement, however close its
words: "Production uses PostgreSQL 16" is the correction of a forgotten
"Production uses PostgreSQL 15", not its repeat. Specifics are numbers and names
(a capitalised word past a sentence's start, a word with inner capitals, digits
or dots: PostgreSQL, fly.io, v2).

A forget holds on the branch it was made on and on branches forked from it
later (the write sequence at the time is kept with it, and a branch sees its
ancestors up to its fork point, as it sees their records): forgetting on a fork
leaves main as it was.

`scrub_outcome` keeps what was forgotten out of the session lines built from a
session's summary: its root causes, its next steps and the sentences of the
request or of Claude's last message that say it (the summary itself is history,
unchanged).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from memory_anchor.worker.memory.common import Wording, now, tokens
from memory_anchor.worker.memory.cues import terms
from memory_anchor.worker.store import forgotten as store_forgotten
from memory_anchor.worker.store.purge import HASHED_KEY, hashed_key
from memory_anchor.worker.store.records import MAIN, Records, View, resolve_view

Kind = Literal["fact", "next_step"]

# How close a new wording must be to count as the forgotten one: for facts what
# extraction takes for a near-duplicate (NEAR_DUPLICATE), for next steps what the
# open items take for the same step restated (SAME_ITEM).
SAME_WORDING = {"fact": 0.85, "next_step": 0.7}


def wording_key(text: str) -> str:
    """A wording normalised: its significant words, lower-cased and lightly stemmed."""
    return " ".join(tokens(text))[:500] or (text or "").strip().lower()[:500]


class Forgotten:
    def __init__(self, db):
        self.db = db
        self._read: dict[tuple[str, str], tuple[tuple, list[_Entry]]] = {}

    def record(self, conn, *, project: str, kind: Kind, item_id: str, text: str, action: str, actor: str,
               reason: str | None, branch: str = MAIN) -> dict[str, Any]:  # fmt: skip
        """Keep `text` out of memory from now on, on `branch` and on branches forked from it
        later (inside the caller's write transaction)."""
        row = store_forgotten.add(conn, project=project or "", kind=kind, item_id=str(item_id), text=text,
                                  key=wording_key(text), action=action, actor=actor, reason=reason, at=now(),
                                  branch=branch or MAIN, seq=Records.head_seq(conn))  # fmt: skip
        return _row(row)

    def find(self, conn, project: str, kind: Kind, *texts: str | None, branch: str | View = MAIN) -> dict[str, Any] | None:
        """The forgotten entry one of `texts` repeats on `branch` (a name or a view), or None.
        The one check every writer asks."""
        wanted = [t for t in texts if t and t.strip()]
        entries = self._on(conn, self._entries(conn, project, kind), branch) if wanted else []
        for text in wanted:
            said = _Said(text)
            for entry in entries:
                if said.repeats(entry, kind):
                    return entry.row
        return None

    def _entries(self, conn, project: str, kind: Kind) -> list[_Entry]:
        """The project's forgotten wordings of `kind`, each read once. Rows are never changed, so
        the list read last stands while the rows this connection sees are the same (count and
        highest id: on PostgreSQL a row may commit after one with a higher id; the length of
        their texts, which a purge empties)."""
        project = project or ""
        seen = store_forgotten.seen(conn, project, kind)
        cached = self._read.get((project, kind))
        if cached is None or cached[0] != seen:
            cached = (seen, [_Entry(_row(r)) for r in store_forgotten.entries(conn, project, kind)])
            self._read[(project, kind)] = cached
        return cached[1]

    @staticmethod
    def _on(conn, entries: list[_Entry], branch: str | View | None) -> list[_Entry]:
        """The entries that hold on `branch`: made on it, or on an ancestor before the fork."""
        if not entries:
            return entries
        view = branch if isinstance(branch, View) else resolve_view(conn, branch or MAIN)
        chain = dict(view.chain)
        return [e for e in entries if e.branch in chain and (chain[e.branch] is None or e.seq <= chain[e.branch])]

    def list(self, project: str | None = None, kind: Kind | None = None, item_id: str | None = None,
             limit: int = 100, conn=None) -> list[dict[str, Any]]:  # fmt: skip
        """Corrections, newest first: the history of who forgot or edited what, and when."""
        rows = store_forgotten.history(conn or self.db.reader(), project=project, kind=kind, item_id=item_id, limit=limit)
        return [_row(r) for r in rows]

    def scrub_outcome(self, conn, project: str, summary: dict[str, Any], view: View | None = None) -> dict[str, Any]:
        """`summary` without what was forgotten since it was written, for the session's line:
        its root causes and next steps, and the sentences of the request and of Claude's
        last message that say a forgotten thing.

        A root cause also counts as forgotten when a forgotten fact quotes it: the fact
        extraction makes of a cause is "<what was done>: <cause>" (model.root_cause_facts)."""
        data = summary.get("data") or {}
        where = view or summary.get("branch") or MAIN
        facts = self._on(conn, self._entries(conn, project, "fact"), where)
        steps = self._on(conn, self._entries(conn, project, "next_step"), where)
        if not facts and not steps:
            return summary
        causes = [c for c in data.get("root_causes") or [] if not _Said(c).in_any(facts, "fact", quoted=True)]
        following = [n for n in data.get("next") or [] if not _Said(n).in_any(steps, "next_step")]
        scrubbed = {k: v for k, v in (("root_causes", causes), ("next", following)) if k in data}
        for key in ("request", "completed"):  # the user's words, Claude's: the sentences that said it go
            if isinstance(data.get(key), str):
                scrubbed[key] = " ".join(s for s in _SENTENCE_END.split(data[key]) if not _says_any(s, facts + steps))
        if all(scrubbed[k] == data[k] for k in scrubbed):
            return summary
        return {**summary, "data": {**data, **scrubbed}}


class _Entry:
    """A forgotten row and its wording, read once."""

    __slots__ = ("row", "wording", "denies", "terms", "words", "specifics", "branch", "seq")

    def __init__(self, row: dict[str, Any]):
        self.row = row
        self.wording = Wording(row["text"])
        self.denies = _denies(row["text"])
        self.terms = terms(row["text"])
        self.words, self.specifics = _specifics(row["text"])
        self.branch = row.get("branch") or MAIN
        self.seq = int(row.get("seq") or 0)


class _Said:
    """A candidate wording, compared with forgotten entries."""

    def __init__(self, text: Any):
        self.text = text if isinstance(text, str) else ""
        self.key = wording_key(self.text)
        self.wording = Wording(self.text)
        self.denies = _denies(self.text)
        self.words, self.specifics = _specifics(self.text)

    def repeats(self, entry: _Entry, kind: Kind) -> bool:
        """Does it say what `entry` said? Not when one of them denies it: the words of "we do not
        deploy on Fridays" are those of "we deploy on Fridays" ("not" is a stop word). Nor when
        one names a number or a name the other does not ("PostgreSQL 16" corrects "15")."""
        if not self.text.strip():
            return False
        if entry.row["key"].startswith(HASHED_KEY):  # purged: only its hash is left, the same words match it
            return hashed_key(self.key) == entry.row["key"]
        if self.denies != entry.denies:
            return False
        if not (_named_in(self.specifics, entry.words) and _named_in(entry.specifics, self.words)):
            return False
        return entry.row["key"] == self.key or self.wording.similarity(entry.wording) >= SAME_WORDING[kind]

    def in_any(self, entries: list[_Entry], kind: Kind, *, quoted: bool = False) -> bool:
        lowered = self.text.strip().lower()
        return any(self.repeats(e, kind) or (quoted and lowered and lowered in e.row["text"].lower()) for e in entries)


def _says_any(sentence: str, entries: list[_Entry]) -> bool:
    """Does `sentence` say what one of `entries` said: at least 80 % of its words, two at least
    (the rule of cues.covers, on the entries' words read once)?"""
    said = terms(sentence)
    for entry in entries:
        shared = len(entry.terms & said)
        if entry.terms and shared >= min(2, len(entry.terms)) and shared >= 0.8 * len(entry.terms):
            return True
    return False


_NEGATION = re.compile(r"(?i)\b(?:not|no|never|without)\b|n't\b|不|没|別|别|ない|않|안 |못")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


_WORDS = re.compile(r"[^\W_](?:[\w.+#-]*[^\W_])?")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)$")


def _specifics(text: str) -> tuple[set[str], set[str]]:
    """(every word lower-cased, the words that are specifics): numbers, and names, a word with a
    capital past a sentence's start, inner capitals, a digit or an inner dot (PostgreSQL, Render,
    fly.io, v2). Compared case-blind: "render" in one wording and "Render" in the other agree."""
    words, specifics = set(), set()
    for match in _WORDS.finditer(text or ""):
        word = match.group(0)
        lowered = word.lower()
        words.add(lowered)
        inner_capital = any(c.isupper() for c in word[1:])
        capital_name = word[0].isupper() and not _SENTENCE_START.search(text[: match.start()])
        if any(c.isdigit() for c in word) or "." in word or inner_capital or capital_name:
            specifics.add(lowered)
    return words, specifics


def _named_in(specifics: set[str], words: set[str]) -> bool:
    """Does every specific appear among `words`? A number exactly ("15" is not "16"); a name
    also as a longer or shorter form of itself ("Postgres" and "PostgreSQL")."""
    for item in specifics - words:
        if any(c.isdigit() for c in item):
            return False
        if not any(len(w) >= 4 and len(item) >= 4 and (w.startswith(item) or item.startswith(w)) for w in words):
            return False
    return True


def _denies(text: str) -> bool:
    return _NEGATION.search(text) is not None


def _row(row) -> dict[str, Any]:
    out = dict(row)
    out.pop("author", None)  # the team database's bookkeeping; `actor` says who
    out.pop("private", None)
    out["purged"] = str(out.get("key") or "").startswith(HASHED_KEY)
    return out
