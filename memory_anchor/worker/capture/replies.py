"""Claude's replies within a session: the passages worth remembering, a few a turn.

A session's summary keeps Claude's last message only, yet explanations, the reason a
tool was chosen and what failed are said along the way, in the turns before. At each
Stop the turn's texts (the history importer hands them over; a live Stop's are read
from its transcript) are cut into passages, and those that say something are kept:

- a passage is a paragraph, or a few short ones together, at most PASSAGE_CHARS;
- a short code block (commands, a line of config: at most SHORT_CODE_LINES lines) stays with
  the paragraph that introduces it, each line as inline code: "Use `--file` for a plain Nix
  file:" says nothing without `nix eval --file lib/x.nix`, and how-to answers are mostly that.
  A longer block is a file's content or a diff, which the tool calls keep;
- narration is dropped: a passage of fewer than MIN_WORDS words, a lead-in to a tool
  call (a short passage that ends with ":"), a bare list of tasks (every line a
  check box or a numbered step);
- at most PER_TURN passages a turn, the most informative (distinct words) first, in
  their order; the same passage said twice in a session is one.

Pure text work: redaction happens where they are stored, like everything captured.
"""

from __future__ import annotations

import re

PASSAGE_CHARS = 600  # about what the embedding model reads (128 tokens)
MIN_WORDS = 14
PER_TURN = 6
MAX_TEXT_CHARS = 20_000  # of one message: a longer one is a document Claude wrote out, its head says enough
_LEAD_IN = 160  # a passage this short that ends with ":" introduces what follows (a tool call, a list)
_WORD = re.compile(r"\w[\w'./-]*", re.UNICODE)
_TASK_LINE = re.compile(r"^\s*(?:[-*]\s*\[[ xX]\]|\d+[.)]\s|[-*]\s*(?:✅|☐|☑|⬜|🔲))")
_CODE_FENCE = re.compile(r"```[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
SHORT_CODE_LINES = 8
SHORT_CODE_CHARS = 400


def passages(texts: list[str], *, limit: int = PER_TURN) -> list[str]:
    """The passages of one turn's texts worth keeping, in the order they were said."""
    found: list[tuple[int, int, str]] = []  # (distinct words, position, passage)
    seen: set[str] = set()
    for text in texts:
        for passage in _split(_CODE_FENCE.sub(_short_code, (text or "")[:MAX_TEXT_CHARS])):
            key = " ".join(passage.lower().split())
            if key in seen or not _says_something(passage):
                continue
            seen.add(key)
            words = {w.lower() for w in _WORD.findall(passage)}
            found.append((len(words), len(found), passage))
    best = sorted(found, key=lambda f: (-f[0], f[1]))[:limit]
    return [passage for _, _, passage in sorted(best, key=lambda f: f[1])]


def _short_code(block: re.Match[str]) -> str:
    """A short code block as lines of inline code, right under what introduced it; a long one, nothing."""
    lines = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    if not lines or len(lines) > SHORT_CODE_LINES or sum(len(line) for line in lines) > SHORT_CODE_CHARS:
        return " "
    return "\n" + "\n".join(line if "`" in line else f"`{line}`" for line in lines) + "\n"


def _split(text: str) -> list[str]:
    """Paragraphs, short neighbours joined, long ones cut at sentence ends, each at most PASSAGE_CHARS."""
    out: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        for piece in _cut(paragraph):
            if current and len(current) + len(piece) + 1 > PASSAGE_CHARS:
                out.append(current)
                current = ""
            current = f"{current}\n{piece}" if current else piece
    if current:
        out.append(current)
    return out


def _cut(paragraph: str) -> list[str]:
    if len(paragraph) <= PASSAGE_CHARS:
        return [paragraph]
    pieces, current = [], ""
    for sentence in re.split(r"(?<=[.!?。！？])\s+|\n", paragraph):
        if current and len(current) + len(sentence) + 1 > PASSAGE_CHARS:
            pieces.append(current)
            current = ""
        current = f"{current} {sentence}".strip() if current else sentence[:PASSAGE_CHARS]
    if current:
        pieces.append(current)
    return pieces


def _says_something(passage: str) -> bool:
    words = _WORD.findall(passage)
    if len(words) < MIN_WORDS and not _cjk_heavy(passage):
        return False
    if len(passage) <= _LEAD_IN and passage.rstrip().endswith((":", "：")):
        return False
    lines = [line for line in passage.splitlines() if line.strip()]
    return not (len(lines) > 1 and all(_TASK_LINE.match(line) for line in lines))


def _cjk_heavy(passage: str) -> bool:
    """Chinese and Japanese write without spaces: a long run of their characters says as much as many words."""
    return sum(1 for ch in passage if "\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af") >= 30
