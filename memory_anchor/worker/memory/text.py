"""Line text for the briefing, recall and extracted statements: one line, cut only where a word ends.

`clip` never cuts inside a character or a word, in any script: it cuts at a
space, after punctuation (Latin or CJK), or where the script changes (Han to
kana, Latin to Hangul, …), and never between a character and the combining
marks, variation selectors or zero-width joiners that belong to it.
"""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
_PUNCT = set(",;:.!?)]}>\"'，。、；：！？）」』】〉》・")
_TRAILING = " ,;:.-–—，、；：·"
_JOINERS = {"\u200d", "\u200c"}


def one_line(text: str) -> str:
    return " ".join(str(text or "").split())


def _script(char: str) -> str:
    code = ord(char)
    if 0x3040 <= code <= 0x309F:
        return "hiragana"
    if 0x30A0 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF:
        return "katakana"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF:
        return "han"
    if 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "hangul"
    if char.isspace():
        return "space"
    if char.isalnum() or char in "_-./@":
        return "word"
    return "other"


def _attached(char: str) -> bool:
    """True for a code point that belongs to the character before it."""
    return (
        unicodedata.combining(char) != 0
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char in _JOINERS
        or 0xFE00 <= ord(char) <= 0xFE0F
        or 0x1F3FB <= ord(char) <= 0x1F3FF  # skin tones
        or 0xDC00 <= ord(char) <= 0xDFFF
    )


def is_boundary(text: str, i: int) -> bool:
    """May `text` be cut before index `i` without splitting a character or a word?"""
    if i <= 0 or i >= len(text):
        return True
    before, after = text[i - 1], text[i]
    if _attached(after) or before in _JOINERS:
        return False
    if before.isspace() or after.isspace():
        return True
    if before in _PUNCT:
        return True
    a, b = _script(before), _script(after)
    if a != b and "other" not in (a, b) and not {a, b} <= {"word"}:
        return True  # Han → kana, Latin → Hangul, …
    return False


def clip(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut at a word boundary (with …)."""
    flat = one_line(text)
    if len(flat) <= limit:
        return flat
    room = max(limit - len(ELLIPSIS), 1)
    cut = next((i for i in range(room, 0, -1) if is_boundary(flat, i) and i >= room * 0.5), None)
    if cut is None:  # one long run: any boundary at all, else the end of the last whole character
        cut = next((i for i in range(room, 0, -1) if is_boundary(flat, i)), None)
    if cut is None:
        cut = room
        while cut > 1 and _attached(flat[cut]):
            cut -= 1
    head = flat[:cut].rstrip(_TRAILING)
    return (head or flat[:cut]) + ELLIPSIS


def clip_path(path: str, limit: int) -> str:
    """A file's path in at most `limit` characters, its start dropped before its end: the file's
    name says which file it is ("…/subcategories/check_for_invalidation.sql"), the folders above
    it less. Its separators stay as written."""
    if len(path) <= limit:
        return path
    room = limit - len(ELLIPSIS)
    # The longest tail that starts at a separator and fits; the name's own tail when none does.
    starts = [i for i, c in enumerate(path) if c in "/\\" and len(path) - i <= room]
    return ELLIPSIS + (path[starts[0]:] if starts else path[-room:])


_VOLATILE = re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}\b|\b\d{1,2}:\d{2}\b|\((?:id|fact|last)[^)]*\)|×\d+")


def line_key(line: str) -> str:
    """What a line says, without its times, ids and counts: two lines with one key repeat each other."""
    return " ".join(_VOLATILE.sub("", line).lower().strip("- ").split())


# Chinese and Japanese write without spaces: each of their characters counts as a word.
_WORDS = re.compile(r"[\u3040-\u9fff\uac00-\ud7af]|[^\W\u3040-\u9fff\uac00-\ud7af]+")


def names_a_subject(text: str) -> bool:
    """Words enough to say what something is about: three or more, and not a slash command
    ("yes", "1", "continue", "/catchup" name nothing)."""
    return not text.lstrip().startswith("/") and len(_WORDS.findall(text)) >= 3
