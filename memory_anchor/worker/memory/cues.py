"""Cue words and sentences: what the local readers share.

The local path reads knowledge without Claude from plain text:
`instructions.py` the user's standing instructions in a prompt, `outcomes.py`
what Claude's last message says was done, found and left. Both work per
sentence (`sentences`), in English, Chinese, Japanese and Korean, and share the
cue words here: the CJK cue words of rules, decisions and preferences, hedges,
one-off markers, questions, and the terms an instruction says it replaces.
`terms` and `covers` match two texts by their words (CJK by character pairs):
open items closed by a later outcome, rules recalled for a prompt.
"""

from __future__ import annotations

import re

from memory_anchor.worker.memory.common import STOPWORDS, tokens
from memory_anchor.worker.memory.text import clip

MAX_STATEMENT_CHARS = 300


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


# --- shared by the readers ---------------------------------------------------------

# Chinese, Japanese and Korean cue words of standing statements (instructions.py reads English by form).
CJK_RULE = _any(
    # 以后 is "from now on" before an instruction, not inside 可以后台 ("can … the background"), nor
    # "later I …" / "later be able to …" (以后我, 以后能够), which narrate
    r"(?<![可所])以后(?![我能会可])|今后|从现在起|从今以后|往后|始终|总是|一律|务必|每次|不要再|别再|不要|不许|不准|禁止|千万别|永远不要|必须"
    # "every … must …": a quantifier over all cases and an obligation ("所有删除都要先问我")
    r"|(?:所有|任何|凡是|一切|全部)[^，,。；]{0,20}都(?:要|得|必须|不|别|先)"
    # "I need you to … for every risky operation …": a request over a kind of case, not one task
    r"|我(?:需要|希望|要)你[^。；]{0,30}?(?:针对|凡是|所有|任何|每次|遇到|涉及)[^。；]{0,30}?(?:要|都|必须|先)"
    # the user keeps the decisions: "删除都要给我决策", "我做判断和决策"
    r"|(?:给我|由我|让我|我来|我做)[^，,。；]{0,4}决策|由我(?:来)?决定"
    # "next time …, never …": a time to come and a prohibition or an obligation
    r"|(?:下次|下一次|今后|每当|将来)[^。；]{0,20}?(?:不能|不可以|不要|别|必须|要先)",
    r"今後|これから(は|も)|常に|いつも|必ず|毎回|しないで|しないこと|使わないで|禁止|やめて|ないように",
    r"앞으로|항상|언제나|반드시|매번|하지\s?마|하지\s?말|쓰지\s?마|사용하지\s?마|금지",
)
CJK_DECISION = _any(
    # 决策 is a noun ("decision-making"), no decision announced: who decides is a rule (CJK_RULE)
    r"决定|定下来|就用|改用|换成|统一用|采用|而不是|代替|取代|不再用",
    r"決定|決めた|決めました|ことにし|に変更|に切り替え|の代わりに|ではなく|を採用",
    r"결정|하기로|쓰기로|사용하기로|대신|로 바꾸|으로 바꾸|로 변경|으로 변경",
)
# What the user wants of the work in forms that usually, not always, last: said once. How much of it,
# done by itself ("我需要你全自动帮我配置", "我需要你把我和你的所有对话沉淀在ob里面"), and what they need
# instead of what they got ("我需要的是实操方案，不是仅仅表述问题").
CJK_WANTS_ONCE = _any(
    r"我(?:需要|希望|要)你[^。；？?]{0,12}?(?:全自动|全部|所有)",
    r"我(?:需要|要|想要)的是[^。？?]{1,40}?[，,]\s*(?:而)?不是",
)
CJK_PREFERENCE = _any(
    # 偏好 said by the user ("我偏好"); alone it is as often a noun (人群偏好, "audience preference")
    r"更喜欢|(?:我|我们)(?:更|比较)?偏好|优先用|优先使用|倾向于"
    # how the user wants the assistant to think or work ("我需要你结合…的思维去…")
    r"|我(?:需要|希望|要)你[^。；]{0,20}?(?:思维|思路|原则|方式|习惯|风格|态度)",
    r"好み|好きです|優先して|の方がいい",
    r"선호|더 좋아",
)
HEDGE = _any(
    r"\b(maybe|perhaps|might|i think|i guess|not sure|probably|could we|should we)\b",
    # 尽可能 is "as far as possible"; 不确定 hedges when the speaker is unsure (我不确定), not in "不确定的事情"
    r"也许|(?<!尽)可能|我觉得|好像|(?:我|还)不确定",
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
ONE_OFF = _any(r"\b(for now|this time|just this once|right now|for today|temporarily)\b", r"暂时|这次|这一次|先不",
               r"今回|とりあえず|一旦", r"이번에는|이번만|일단")
QUESTION = re.compile(r"[?？]\s*$|^(how|what|why|where|when|which|who|can|could|should|is|are|do|does|did|would|will|shall)\b", re.I)
_FILLER = re.compile(r"(?i)^(ok(ay)?|also|and|so|btw|by the way|note|fyi|hey|thanks?)[,:!.\s]+")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def has_cjk(text: str) -> bool:
    return bool(_CJK_CHAR.search(text or ""))


_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\uac00-\ud7af]")


def is_chinese(text: str) -> bool:
    """CJK text without kana or hangul: Chinese, which the readers read by its own forms."""
    return has_cjk(text) and not _KANA_HANGUL.search(text)


HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)?([^:：*#]{1,40}?)(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*(.*)$")
BULLET = re.compile(r"^\s*(?:[-*•・]|\d+[.)、]|[（(]?\d+[)）])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(\[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af])|(?<=[。！？；])")


def sentences(text: str) -> list[str]:
    """Sentences and list items of a text, in order, markdown emphasis removed."""
    out = []
    for line in (text or "").splitlines():
        line = BULLET.sub("", line.replace("**", "").replace("__", "")).strip()
        if not line:
            continue
        out += [part.strip() for part in _SENTENCE_END.split(line) if part and part.strip()]
    return out


def clean_sentence(sentence: str) -> str:
    """The sentence without filler words in front or punctuation at the end, at most MAX_STATEMENT_CHARS."""
    sentence = _FILLER.sub("", sentence.strip()).strip()
    sentence = sentence.rstrip("。.!！；; ")
    if len(sentence) > MAX_STATEMENT_CHARS:
        sentence = clip(sentence, MAX_STATEMENT_CHARS)
    return sentence


def replaced_terms(sentence: str) -> list[str]:
    """What a statement says it replaces: "instead of Y", "不再用 Y", "Y の代わりに"."""
    found = []
    for pattern in _REPLACES:
        for match in pattern.finditer(sentence):
            value = match.group(1).strip(" .,;:'\"`")
            if value and value.lower() not in {"a", "the", "to", "be", "it", "this", "that", "only", "just", "yet"}:
                found.append(value)
    return list(dict.fromkeys(found))


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


# Where a CJK question's grammar sits (的, 了, 什么, 怎么, 哪里, 为什么, and Japanese kana particles):
# its runs are cut there, so its pairs are those of its subject ("工厂网站做好放在哪里" gives
# 工厂, 网站, 做好, 放在… but not 哪里, which any other question shares).
_CJK_GRAMMAR = re.compile(r"[的了吗呢吧啊是在和与及或就都也还又这那哪些个我你他她它们什么怎为何如里多少几有要会能可以之其把被给对让"
                          r"\u3040-\u309f]+")
_LATIN_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#-]*[a-z0-9+#]|[a-z0-9]")


def subject_terms(text: str) -> set[str]:
    """What a question is about, to look for as it is written: its words in other scripts (lower
    case, not stemmed) and the character pairs of its CJK runs cut at their grammar."""
    return set().union(*subject_words(text))


def subject_words(text: str) -> list[set[str]]:
    """`subject_terms` word by word: each word of another script alone, each CJK run cut at its
    grammar as its character pairs (ライブラリ is one word of four pairs, 签名失败 one of three)."""
    lowered = (text or "").lower()
    out = [{w} for w in _LATIN_WORD.findall(_CJK_RUN.sub(" ", lowered)) if w not in STOPWORDS]
    for run in _CJK_RUN.findall(lowered):
        for part in _CJK_GRAMMAR.split(run):
            if len(part) > 1:
                out.append({part[i : i + 2] for i in range(len(part) - 1)})
    return out


def share_said(wanted: set[str], text: str) -> float:
    """The share of a question's subject (`wanted`: its `subject_terms`) that `text` says, word for word."""
    said = (text or "").lower()
    return sum(1 for term in wanted if term in said) / len(wanted) if wanted else 0.0


def covers_characters(text: str, item: str, *, at_least: float = 0.6) -> bool:
    """`covers` for a CJK item, one character a word: a paraphrase keeps the writer's characters
    but few of their bigrams ("不要再用 flake8" said again as "不再使用 flake8")."""
    if not _CJK_RUN.search(item or ""):
        return False

    def characters(value: str) -> set[str]:
        words = {t for t in terms(value) if not _CJK_RUN.search(t)}
        return words.union(*(set(run) for run in _CJK_RUN.findall(value or "")))

    wanted, said = characters(item), characters(text)
    shared = len(wanted & said)
    return shared >= min(2, len(wanted)) and shared / len(wanted) >= at_least


def covers(text: str, item: str, *, at_least: float = 0.6) -> bool:
    """Does `text` say most of what `item` says (its words, two of them at least)?"""
    wanted, said = terms(item), terms(text)
    if not wanted:
        return False
    shared = len(wanted & said)
    return shared >= min(2, len(wanted)) and shared / len(wanted) >= at_least
