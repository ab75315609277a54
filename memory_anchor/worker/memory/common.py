"""Small shared pieces of the memory model: who is writing, text normalisation,
similarity, token estimates and time helpers.

Actors are written into every version (`records.actor`) as `human:<name>`,
`agent:<agent_id>` or `system:<job>` so that history(id) says who did what.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from typing import Any, Iterable

from memory_anchor.worker.store.cjk import is_cjk_word, query_words
from memory_anchor.worker.store.records import RecordError, parse_time

DEFAULT_AGENT = "claude-code"
DAY = 86_400.0

# Words that say nothing about what a fact is about; dropped from fact keys and
# from lexical similarity so that "we use Qdrant" and "Qdrant is used" meet.
STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto about as is are was were be been
    being it its this that these those there here we our us you your i my me he she they them their his her not no
    do does did done have has had will would shall should can could may might must so such than too very just also
    use uses used using which who whom what when where why how all any each some more most other only own same""".split()
)

_WORD = re.compile(r"[\w\-\.]+", re.UNICODE)


def agent_actor(agent_id: str | None) -> str:
    return f"agent:{agent_id or DEFAULT_AGENT}"


def human_actor(name: str | None) -> str:
    """`human:<name>`; without a name, the account the worker runs as (the person who owns it)."""
    name = (name or "").strip() or _login_name()
    return name if name.startswith("human:") else f"human:{name}"


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "human"


def is_human(actor: str | None) -> bool:
    return bool(actor) and str(actor).startswith("human:")


def now() -> float:
    return time.time()


def to_epoch(value: Any, field: str) -> float:
    """ISO 8601 or epoch seconds → epoch seconds, or a clear 400 naming the field."""
    try:
        return parse_time(value)
    except ValueError as exc:
        raise RecordError(f"{field}: {exc}", code="invalid_timestamp")


def tokens(text: str) -> list[str]:
    """Lower-cased words with light stemming, stopwords removed."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    out = []
    for word in _WORD.findall(text):
        word = word.strip(".-_")
        if not word or word in STOPWORDS:
            continue
        out.append(_stem(word))
    return out


def _stem(word: str) -> str:
    # Enough to make "fixed"/"fixes"/"fixing" and "databases"/"database" meet.
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def fact_key(subject: str | None, text: str) -> str:
    """The normalised subject of a fact: what conflict detection compares.

    With a subject (given by the model or the caller) the key is its words; without
    one, the first six significant words of the fact, in order. Branch merges
    treat two facts with the same key as statements about the same thing.
    """
    words = tokens(subject) if subject and subject.strip() else tokens(text)[:6]
    return " ".join(words)[:200] or (text or "").strip().lower()[:200]


class Wording:
    """A short text's words and trigrams, read once: comparing one text with many
    (the forgotten list) then costs set operations, not tokenising both each time."""

    __slots__ = ("text", "words", "grams")

    def __init__(self, text: str):
        self.text = text or ""
        found = tokens(self.text)
        compact = " ".join(found)
        self.words = set(found)
        self.grams = {compact[i : i + 3] for i in range(max(len(compact) - 2, 1))} if compact else set()

    def similarity(self, other: "Wording") -> float:
        """0..1: how much the two say the same (word overlap and trigram overlap)."""
        ta, tb = self.words, other.words
        if not ta or not tb:
            return 1.0 if self.text.strip().lower() == other.text.strip().lower() else 0.0
        jaccard = len(ta & tb) / len(ta | tb)
        ga, gb = self.grams, other.grams
        dice = 2 * len(ga & gb) / (len(ga) + len(gb)) if ga and gb else 0.0
        return max(jaccard, dice)


def text_similarity(a: str, b: str) -> float:
    """0..1: how much two short texts say the same (word overlap and trigram overlap)."""
    return Wording(a).similarity(Wording(b))


def estimate_tokens(text: str) -> int:
    """About four characters per token, the usual rule for English and code."""
    return max(1, math.ceil(len(text or "") / 4))


def keyword_words(text: str, limit_terms: int = 12) -> list[str]:
    """The significant words of `text` (CJK runs as grams), for a keyword search OR-ing them."""
    seen: list[str] = []
    for word in query_words(unicodedata.normalize("NFKC", text or "").replace("'", " ")):
        if word in STOPWORDS or (len(word) < 2 and not is_cjk_word(word)) or word in seen:
            continue
        seen.append(word)
        if len(seen) >= limit_terms:
            break
    return seen


def fts_query(text: str, limit_terms: int = 12) -> str:
    """`keyword_words` as an FTS5 MATCH expression: OR-ed, each quoted."""
    return " OR ".join(f'"{w}"' for w in keyword_words(text, limit_terms))


def unique(values: Iterable[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        if value and value not in out:
            out.append(value)
    return out


def one_line(text: str, limit: int) -> str:
    """`text` flattened to one line and cut to `limit` characters (with …), for context lines."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
