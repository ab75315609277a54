"""Keyword-index words for scripts written without spaces: Chinese, Japanese, Korean.

FTS5's `unicode61` tokenizer splits on spaces and punctuation, so a Chinese
sentence ("女儿王小红的电话是13800138000") is one token and no word inside it
can match. Before text reaches the index, each run of CJK characters is
replaced by its bigrams and its single characters:

    index_words("女儿的电话")  ->  " 女儿 儿的 的电 电话 女 儿 的 电 话 "

Bigrams find the two-character words most Chinese and Japanese words are
("电话", "女儿", "会議"), and the Korean stems inside a word with its particle
("회의는" holds "회의"); single characters find what shares only a character
with the question ("吃什么药" and "降压药" share "药"). BM25's document
frequencies weigh them: a rare bigram counts for much, "的" for almost nothing.
The same function shapes the query (`query_words`), so both sides agree.

A segmenter (jieba, sudachipy, kiwipiepy) was the alternative: one per
language, a dictionary to load at start-up (jieba: ~1 s, ~50 MB), and a miss
wherever the dictionary and the user's words differ. Bigrams need nothing and
cover all three scripts; see docs/benchmarks.md for the measurements.

Latin text passes through unchanged, so European words (diacritics folded by
`remove_diacritics 2`) index exactly as before. The database connection
registers `index_words` as the SQL function `fts_words` (memory_anchor/worker/store/db.py);
the FTS triggers call it (migration 0005_cjk_keywords).
"""

from __future__ import annotations

import re

# Han (with extensions and compatibility ideographs), kana (with half-width
# katakana and the prolonged sound mark), Hangul syllables and jamo.
_CJK = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
SQL_FUNCTION = "fts_words"

# Particles and question words: in a query they say how the question is asked,
# not what it is about, and they match most stored text. Dropped on the query
# side only (the index keeps every character, so nothing is lost for good).
QUERY_STOP = frozenset(
    "的 了 吗 呢 吧 啊 是 在 什么 怎么 哪里 哪儿 什 么 哪 谁 几 "
    "の は が を に で と も か ね よ です ます "
    "은 는 이 가 을 를 에 의 도 요".split()
)


def has_cjk(text: str) -> bool:
    return bool(text) and _CJK_CHAR.search(text) is not None


def written_in_cjk(text: str) -> bool:
    """Is the text, or part of it, written in a CJK script (a phrase, not one stray character):
    "planning-with-files 插件是怎么装的？" is."""
    return sum(len(run) for run in CJK_RUN.findall(text or "")) >= 2


def grams(run: str) -> list[str]:
    """A CJK run's bigrams, then its single characters (each once, in order)."""
    chars = list(run)
    out = [a + b for a, b in zip(chars, chars[1:])] + chars
    return list(dict.fromkeys(out))


def index_words(text: str | None) -> str | None:
    """`text` as the keyword index stores it: each CJK run replaced by its grams; other text unchanged."""
    if not text or not has_cjk(text):
        return text
    return CJK_RUN.sub(lambda m: " " + " ".join(grams(m.group())) + " ", text)


def query_words(text: str) -> list[str]:
    """The words of a query, lower-cased, CJK runs as grams (bigrams first), each once.

    Latin words come as the `\\w+` runs the callers filtered before (their own
    stop words and minimum length apply to them); a CJK gram is always kept
    unless it is in QUERY_STOP.
    """
    words: list[str] = []
    for piece in re.findall(r"[\w']+", (text or "").lower()):
        if not has_cjk(piece):
            words.append(piece)
            continue
        for part in re.split(f"([{_CJK}]+)", piece):
            if not part:
                continue
            if CJK_RUN.fullmatch(part):
                words.extend(g for g in grams(part) if g not in QUERY_STOP)
            else:
                words.append(part)
    return list(dict.fromkeys(words))


def is_cjk_word(word: str) -> bool:
    return bool(word) and CJK_RUN.fullmatch(word) is not None
