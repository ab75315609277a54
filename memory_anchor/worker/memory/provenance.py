"""Where a fact may come from: the rule the code enforces whatever an extractor proposes.

The briefing tells Claude to follow the standing rules it lists, so:

- a **rule, decision, preference or convention** stands only on a sentence
  the user typed in their own words (`user_words.own_words`: not Claude Code's
  text, not pasted material). Claude's extraction must quote it; the quote is
  looked up in the session's prompts, and a rule without one (from a tool's
  output, from Claude's own message, from a pasted issue) is refused. In a
  reply to Claude's question, only what is said plainly to last ("always",
  "from now on") stands; the rest waits for a human's approval;
- **any other fact** states something about the project, never the agent
  narrating its process ("the Reproducer confirmed …, the Debugger
  identified …"), and is a whole statement: never a heading, a label ending in
  ":", a placeholder ("because..."), a question or a sentence cut off
  (`form.fragment`). Such a fact is refused.

Pure functions: the extractor (extraction.py) applies them to every candidate,
local or Claude's, before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_anchor.schemas.memory_model import STANDING
from memory_anchor.worker.memory.cues import covers, covers_characters, sentences
from memory_anchor.worker.memory.form import fragment
from memory_anchor.worker.memory.instructions import PLAIN, standing_statements
from memory_anchor.worker.memory.outcomes import is_narration
from memory_anchor.worker.memory.text import one_line
from memory_anchor.worker.memory.user_words import own_words

QUOTE_FOUND = 0.8  # of the quote's words, in one sentence of the user's own words
QUOTE_SAYS = 0.5  # of the fact's words, in its quote: a rule says what the user said, not more


@dataclass(frozen=True)
class Prompt:
    """A prompt a person typed, and whether it replies to a question Claude asked."""

    text: str
    answers_a_question: bool = False


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""
    source: str | None = None  # the user's sentence a standing fact stands on
    confidence: float | None = None  # a lower confidence the source allows (a reply: pending approval)


def check(text: str, category: str | None, confidence: float, quote: str | None,
          prompts: Sequence[Prompt]) -> Verdict:  # fmt: skip
    """May this fact be written, and at what confidence?"""
    if (category or "") in STANDING:
        return _standing(text, confidence, quote, prompts)
    if is_narration(text):
        return Verdict(False, "narrates the agent's process, states nothing about the project")
    if (why := fragment(text)) is not None:
        return Verdict(False, f"not a whole statement: {why}")
    return Verdict(True)


def _standing(text: str, confidence: float, quote: str | None, prompts: Sequence[Prompt]) -> Verdict:
    for prompt in prompts:
        for sentence in (s for paragraph in own_words(prompt.text) for s in sentences(paragraph)):
            if not _stands_on(sentence, text, quote):
                continue
            if prompt.answers_a_question and not _said_to_last(sentence):
                return Verdict(True, "a reply to Claude's question", sentence, min(confidence, 0.75))
            return Verdict(True, "", sentence)
    return Verdict(False, "a standing rule must be the user's own words in a prompt (not pasted text, "
                          "tool output, Claude's messages or Claude Code's text)")  # fmt: skip


def _stands_on(sentence: str, text: str, quote: str | None) -> bool:
    if quote and quote.strip():
        found = _normal(quote) in _normal(sentence) or covers(sentence, quote, at_least=QUOTE_FOUND)
        says = covers(quote, text, at_least=QUOTE_SAYS) or covers_characters(quote, text, at_least=QUOTE_SAYS)
        return found and says
    return covers(sentence, text, at_least=0.6)


def _said_to_last(sentence: str) -> bool:
    return any(s.confidence >= PLAIN for s in standing_statements(sentence))


def _normal(text: str) -> str:
    return one_line(text).lower().strip(" .!?;:")


_MARKUP = re.compile(r"[*_`#>|]+")
QUOTED_CHARS = 24  # shorter text may be the session's own words that a file happens to contain


def _flat(text: str) -> str:
    return " ".join(_MARKUP.sub(" ", text or "").lower().split())


def quotes_a_tool(text: str, tool_texts: Sequence[str]) -> bool:
    """Is `text` (a sentence of Claude's message) words a tool wrote into a file or returned, which
    Claude only repeats? Such words are the file's or the tool's, not what the session found."""
    said = _flat(text).strip(" .:;")
    if len(said) < QUOTED_CHARS:
        return False
    return any(said in _flat(written) for written in tool_texts if written)
