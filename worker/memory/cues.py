"""Knowledge by cue words: what the local path reads without Claude.

Two readers, both pure functions over one text:

- `standing_statements(prompt)`: the user's standing instructions and decisions
  ("always …", "never …", "from now on …", "we use X instead of Y",
  "decision: …", "prefer …"; "以后…", "不要再…", "决定：…"; "今後…",
  "…しないで"; "앞으로…", "…하지 마"), each with a confidence on seed 002's
  tiers: >= 0.9 when said plainly (stored active), 0.75 when hedged ("maybe",
  "我觉得", "かもしれない": waits for approval);
- `session_outcome(message)`: what Claude's last message of a session says was
  done, the root causes it found and the next steps it left.

Cue words are matched per sentence, so one prompt may hold several statements
and a question ("should we always …?") holds none. Headings ("Next steps:",
"根本原因：") carry their kind to the bullet lines under them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from worker.memory.common import tokens
from worker.memory.text import clip

PLAIN = 0.95  # said plainly: seed 002's "active" tier (>= 0.9)
USUAL = 0.9  # a convention stated in passing ("we deploy with …")
HEDGED = 0.75  # hedged: the "pending approval" tier (0.7-0.9)
MAX_STATEMENT_CHARS = 300


@dataclass
class Statement:
    kind: str  # rule | decision | preference
    text: str
    confidence: float
    replaces: list[str] = field(default_factory=list)  # what it supersedes ("instead of Y", "不再用 Y")


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    root_causes: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.done or self.root_causes or self.next_steps)


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


# --- standing statements ------------------------------------------------------------

_RULE = _any(
    r"\b(always|never|from now on|going forward|from here on|in the future|henceforth|every time)\b",
    r"\b(make sure (to|that|you)|remember to|be sure to|must (always|never)|should (always|never))\b",
    r"^(please )?(avoid|no more)\b",
    r"\b(don'?t|do not) (ever|use|add|commit|push|touch|edit|run|call|import|change|remove|delete|mock)\b",
    # Chinese
    r"以后|今后|从现在起|从今以后|往后|始终|总是|一律|务必|每次|不要再|别再|不要|不许|不准|禁止|千万别|永远不要|必须",
    # Japanese
    r"今後|これから(は|も)|常に|いつも|必ず|毎回|しないで|しないこと|使わないで|禁止|やめて|ないように",
    # Korean
    r"앞으로|항상|언제나|반드시|매번|하지\s?마|하지\s?말|쓰지\s?마|사용하지\s?마|금지",
)
_DECISION = _any(
    r"^(decision|decided|we decided|we've decided|i decided|let'?s go with|we'?ll go with|we will go with|"
    r"let'?s use|we'?ll use|we will use|the plan is|going with)\b",
    r"\b(instead of|rather than|no longer|switch(ed)? (to|from)|migrat(e|ed|ing) (to|from)|replac(e|ed|ing) \S+ with)\b",
    r"\bwe (use|deploy|host|build|run|store|release|ship|test|lint|format|keep|name|write|log)\b",
    # Chinese
    r"决定|决策|定下来|就用|改用|换成|统一用|采用|而不是|代替|取代|不再用",
    # Japanese
    r"決定|決めた|決めました|ことにし|に変更|に切り替え|の代わりに|ではなく|を採用",
    # Korean
    r"결정|하기로|쓰기로|사용하기로|대신|로 바꾸|으로 바꾸|로 변경|으로 변경",
)
_PREFERENCE = _any(
    r"\b(i|we) (prefer|like to|'?d rather)\b",
    r"^prefer\b",
    r"更喜欢|偏好|优先用|优先使用|倾向于",
    r"好み|好きです|優先して|の方がいい",
    r"선호|더 좋아",
)
_HEDGE = _any(
    r"\b(maybe|perhaps|might|i think|i guess|not sure|probably|could we|should we)\b",
    r"也许|可能|我觉得|好像|不确定",
    r"かもしれない|たぶん|多分|と思う",
    r"아마|것 같|글쎄",
)
_REPLACES = [
    re.compile(r"(?i)\b(?:instead of|rather than|no longer use|no longer|switch(?:ed)? from|migrat\w* from|not)\s+"
               r"(?:using |with |the )?([\w.@/+-]+(?:\s[\w.@/+-]+)?)"),  # fmt: skip
    re.compile(r"(?i)\breplac\w* ([\w.@/+-]+) with\b"),
    re.compile(r"(?:不再用|不要再用|别再用|而不是|代替|取代|不用)\s*([A-Za-z0-9_.@/+-]+|[\u4e00-\u9fff]{2,6})"),
    re.compile(r"([A-Za-z0-9_.@/+-]+|[\u3040-\u30ff\u4e00-\u9fff]{2,6})\s*(?:の代わりに|ではなく|[をは]使わないで)"),
    re.compile(r"([A-Za-z0-9_.@/+-]+|[\uac00-\ud7af]{2,6})\s*(?:대신|말고|쓰지\s?마|사용하지\s?마)"),
]
# One-off instructions are not standing ones.
_ONE_OFF = _any(r"\b(for now|this time|just this once|right now|for today|temporarily)\b", r"暂时|这次|这一次|先不",
                r"今回|とりあえず|一旦", r"이번에는|이번만|일단")
_QUESTION = re.compile(r"[?？]\s*$|^(how|what|why|where|when|which|who|can|could|should|is|are|do|does|did)\b", re.I)
_FILLER = re.compile(r"(?i)^(ok(ay)?|also|and|so|btw|by the way|note|fyi|hey|thanks?)[,:!.\s]+")

# --- outcomes -----------------------------------------------------------------------

_ROOT_CAUSE = _any(
    r"\b(root cause|the cause (was|is)|caused by|was due to|is due to|because|the (bug|problem|issue|failure) (was|is)|"
    r"turned out|the culprit)\b",
    r"根本原因|根因|原因是|原因在于|问题出在|是因为|由于",
    r"根本原因|原因は|原因でした|のせいで|が原因",
    r"근본 원인|원인은|원인이|때문에|때문이",
)
_NEXT_STEP = _any(
    r"^next\b|\bnext[:,]|\b(next steps?|next up|todo|to do|remaining|still (need|needs|have) to|follow[- ]?up|left to|"
    r"should also|we should|not yet|later(,| we)|afterwards|open question)\b",
    r"下一步|接下来|后续|待办|还需要|还要|尚未|遗留",
    r"次は|次に|次のステップ|今後の課題|残タスク|残り|まだ|未対応",
    r"다음 단계|다음으로|남은 작업|할 일|아직|추후|후속",
)
_DONE = _any(
    r"^(i |i've |i have |we |we've )?(fixed|added|implemented|updated|removed|renamed|refactored|created|"
    r"migrated|wrote|changed|moved|replaced|deployed|released|merged|bumped|upgraded|made|set up|configured)\b",
    r"^(done|completed|summary|changes|what i did)\b",
    r"已完成|完成了|修复了|已修复|已经|改好了|搞定",
    r"完了|修正しました|直しました|対応しました|追加しました|実装しました",
    r"완료|수정했|고쳤|추가했|구현했",
)
_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)?([^:：*#]{1,40}?)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*(.*)$")
_BULLET = re.compile(r"^\s*(?:[-*•・]|\d+[.)、]|[（(]?\d+[)）])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(\[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af])|(?<=[。！？；])")


def sentences(text: str) -> list[str]:
    """Sentences and list items of a text, in order, markdown emphasis removed."""
    out = []
    for line in (text or "").splitlines():
        line = _BULLET.sub("", line.replace("**", "").replace("__", "")).strip()
        if not line:
            continue
        out += [part.strip() for part in _SENTENCE_END.split(line) if part and part.strip()]
    return out


def _clean(sentence: str) -> str:
    sentence = _FILLER.sub("", sentence.strip()).strip()
    sentence = sentence.rstrip("。.!！；; ")
    if len(sentence) > MAX_STATEMENT_CHARS:
        sentence = clip(sentence, MAX_STATEMENT_CHARS)
    return sentence


def _replaced(sentence: str) -> list[str]:
    found = []
    for pattern in _REPLACES:
        for match in pattern.finditer(sentence):
            value = match.group(1).strip(" .,;:'\"`")
            if value and value.lower() not in {"a", "the", "to", "be", "it", "this", "that", "only", "just", "yet"}:
                found.append(value)
    return list(dict.fromkeys(found))


def standing_statements(prompt: str) -> list[Statement]:
    """The standing instructions, decisions and preferences a prompt states."""
    out: list[Statement] = []
    for sentence in sentences(prompt):
        if _QUESTION.search(sentence) or _ONE_OFF.search(sentence):
            continue
        if _PREFERENCE.search(sentence):
            kind = "preference"
        elif _DECISION.search(sentence):
            kind = "decision"
        elif _RULE.search(sentence):
            kind = "rule"
        else:
            continue
        if _RULE.search(sentence) and kind == "decision" and not _replaced(sentence):
            kind = "rule"  # "from now on we use X" is an instruction first
        text = _clean(sentence)
        if len(text) < 6:
            continue
        confidence = HEDGED if _HEDGE.search(sentence) else PLAIN if kind != "decision" or _RULE.search(sentence) \
            or re.match(r"(?i)(decision|decided|we decided|决定|決定|결정)", text) else USUAL  # fmt: skip
        out.append(Statement(kind, text, confidence, _replaced(sentence)))
    return _unique_statements(out)


def _unique_statements(items: list[Statement]) -> list[Statement]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = " ".join(item.text.lower().split())
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def session_outcome(message: str) -> Outcome:
    """What was done, the root causes and the next steps in a session's last message."""
    outcome = Outcome()
    heading_kind: str | None = None
    after_heading = False
    for raw in (message or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        is_bullet = bool(_BULLET.match(raw))
        heading = _HEADING.match(line.replace("**", ""))
        kind = _heading_kind(heading.group(1)) if heading and not is_bullet else None
        if kind is not None:
            rest = heading.group(2).strip()
            heading_kind, after_heading = kind, not rest  # "Next steps:" heads a list; "Root cause: X" does not
            if rest:
                _add(outcome, kind, rest)
                heading_kind = None if not raw.rstrip().endswith((":", "：")) else kind
            continue
        if not is_bullet and not after_heading:
            heading_kind = None  # a paragraph ends the list under a heading
        after_heading = False
        for sentence in sentences(line):
            labelled = _HEADING.match(sentence)
            label_kind = _heading_kind(labelled.group(1)) if labelled and labelled.group(2).strip() else None
            if label_kind is not None:  # "… . Root cause: X. Next step: Y." mid-paragraph: keep X and Y, not their labels
                _add(outcome, label_kind, labelled.group(2))
                continue
            kind = heading_kind or _kind_of(sentence)
            if kind is not None:
                _add(outcome, kind, sentence)
    outcome.done = _dedupe(outcome.done)[:6]
    outcome.root_causes = _dedupe(outcome.root_causes)[:4]
    outcome.next_steps = _dedupe(outcome.next_steps)[:6]
    return outcome


_HEADINGS = [
    ("root_cause", re.compile(r"(?i)^(root causes?|causes?|why( it failed)?|diagnosis|根本原因|根因|原因|원인|근본 원인)$")),
    ("next_step", re.compile(r"(?i)^(next steps?|next|todo|to do|follow[- ]?ups?|remaining( work)?|open items|"
                             r"下一步|后续|待办|接下来|次のステップ|次に|今後|残タスク|다음 단계|남은 작업|할 일)$")),  # fmt: skip
    ("done", re.compile(r"(?i)^(done|changes( made)?|fixed|what i did|summary|completed|"
                        r"已完成|完成|变更|修改|完了|変更|対応内容|완료|변경)$")),  # fmt: skip
]


def _heading_kind(label: str) -> str | None:
    label = label.strip().strip("#*_ ")
    return next((kind for kind, pattern in _HEADINGS if pattern.match(label)), None)


def _kind_of(text: str) -> str | None:
    if _ROOT_CAUSE.search(text):
        return "root_cause"
    if _NEXT_STEP.search(text):
        return "next_step"
    if _DONE.search(text.strip()):
        return "done"
    return None


def _add(outcome: Outcome, kind: str, text: str) -> None:
    text = _clean(text)
    if len(text) < 6:
        return
    {"done": outcome.done, "root_cause": outcome.root_causes, "next_step": outcome.next_steps}[kind].append(text)


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- matching -----------------------------------------------------------------------

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def terms(text: str) -> set[str]:
    """The words of a text for matching: stemmed words, and bigrams of CJK runs (no spaces there)."""
    out = set()
    for token in tokens(text):
        if _CJK_RUN.fullmatch(token):
            continue
        out.add(token)
    for run in _CJK_RUN.findall(text or ""):
        out.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return out


def covers(text: str, item: str, *, at_least: float = 0.6) -> bool:
    """Does `text` say most of what `item` says (its words, two of them at least)?"""
    wanted, said = terms(item), terms(text)
    if not wanted:
        return False
    shared = len(wanted & said)
    return shared >= min(2, len(wanted)) and shared / len(wanted) >= at_least
