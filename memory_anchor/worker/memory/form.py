"""The form of a statement memory keeps: a whole sentence, not a fragment of one.

What Claude writes at the end of a session is laid out for a reader who sees all
of it: headings, labels that introduce a list ("Still need to design:"), bold
taglines ("Your understanding, externalized"), table rows, placeholders it offers
as examples ("We decided to use X because..."). Lifted out of that page, none of
them says anything. So before a sentence becomes a fact or an open step, its form
is checked, by structure rather than by phrase:

- **any statement** (`fragment`): not a heading, a table row, a label ending in
  ":", a question, a quotation held up as an example, a placeholder ("...",
  "because…"), or a sentence cut off (an open bracket or backtick, a last word that
  needs more after it: "because", "the", "and");
- **a fact** (`fact_flaw`): that, and a finite verb after its subject
  ("the cache key ignored the locale", "`response.data` is `null`"): a noun phrase
  or a tagline states nothing, an imperative ("Merge the rows from backfill") is
  work, and a sentence that opens on its speaker or the person spoken to ("I've
  created the test file", "You've double-applied it") is about them;
- **a step** (`step_flaw`): that, and work to do: an imperative ("add a
  regression test", "wait for the extraction to finish"), or a sentence that says
  something is still to do ("the migration still needs to be written"). A name
  ("Phase 2"), a status ("User profile: not yet created") or a report of what was
  done ("Clarified the configuration system") is none.

Japanese and Korean text is held to the first test only: its grammar is not read
here. A Chinese step must also open on work, as its English twin must: a verb of
work ("补充单元测试"), a word that leads into one ("给 Redis 加上监控", "在预发环境压测
…", "还要…"), or say that something is still to do ("迁移还没做"). A list of what
Claude needs to know ("产能和交货期", "现有认证") or an offer ("后续可提供：…") is none.
Pure functions.
"""

from __future__ import annotations

import re

from memory_anchor.worker.memory.cues import has_cjk, is_chinese

# What a root cause stated as a phrase is written behind, so that it reads as what it is (outcomes.py).
CAUSE_LABEL = "Root cause: "
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+|[,;:—–()\[\]]")
_CODE_SPAN = re.compile(r"`[^`]*`")
_PLACEHOLDER = re.compile(r"(\.\.\.|…)\s*[\"'”’)]*\s*$|\b\w+\s*(\.\.\.|…)\s*[\"'”’]")
_QUOTED = re.compile(r"""^\s*(["“'‘]).*(["”'’])\s*[.!]?\s*$""")
_LABEL_END = re.compile(r"[:：]\s*(\*\*|__)?\s*$")
_TABLE = re.compile(r"^\s*\||\|.*\|")
_HEADING = re.compile(r"^\s*#{1,6}\s")
# A last word that needs more after it: the sentence was cut off there.
_OPEN_END = frozenset("""a an the and or but nor because since so that which who whose whom where when while if
    unless until than as of to for from with without by in on at into onto about like via per is are was were be
    been being has have had do does did can could will would shall should may might must our your their its my""".split())  # fmt: skip
# Finite verbs whatever the subject: auxiliaries, modals and their negations.
_FINITE = frozenset("""is are was were am has have had does do did can could will would shall should may might must
    isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't can't cannot couldn't won't wouldn't
    shouldn't mustn't it's that's there's here's what's he's she's we're they're you're i'm we've they've i've
    we'll they'll it'll i'll we'd they'd i'd""".split())  # fmt: skip
_PRONOUNS = frozenset("i you we they he she it this that these those there".split())
# Words after which an -ed or -s form is not a finite verb: "the added file", "not yet implemented",
# "been fixed", "its tests".
_NOT_A_SUBJECT = frozenset("""a an the this that these those its our your their my his her no not yet already also
    just still never been be being and or but to of for from with by in on at into as than so , ; : — – ( [
    very more most less much many some any all each every both few""".split())  # fmt: skip
# Adverbs between a subject and its verb ("not" and "yet" are not: "not yet implemented" is a participle).
_ADVERBS = frozenset("still also already always never just now only often usually sometimes".split())
# Imperatives of work: what a step asks someone to do (general English, not one project's words).
_WORK_VERBS = frozenset("""add adjust adopt align allow analyse analyze apply archive ask audit automate backfill
    benchmark build bump cache change check clarify clean close commit compare complete configure confirm connect
    consider consolidate convert copy create debug decide define delete deploy deprecate design detect disable
    discuss document drop edit enable ensure evaluate expand expose extend extract finalize finish fix flesh
    generalize generalise handle harden implement import improve include install integrate introduce investigate
    label link load log look make mark measure merge migrate mock monitor move normalize notify open optimize
    optimise package pin plan polish populate port prepare profile prototype prune publish push reduce refactor
    register reindex release remove rename reorganize repair replace report reproduce request research resolve
    restore restructure resume retry revert review revisit rewrite rollback rotate run schedule seed send separate
    set setup ship simplify sort split start stop store streamline support switch sync tag test tidy track train
    translate trim try tune unify update upgrade upload validate verify wait wire write generate reword revise
    sanitize scrub backport call return pass raise catch wrap inline cover guard avoid share post fetch read print
    show hide limit cap escape quote parse encode decode format lint renew expire deduplicate dedupe paginate batch
    queue throttle reuse reorder group index snapshot version vendor compile bundle minify serve host proxy route
    redirect authenticate authorize encrypt hash sign reply rebase squash cherry-pick ping email tell""".split())  # fmt: skip
# The words that open an imperative's object: "regenerate the stubs", "rewire `auth.py`" (a verb no list holds
# is still an imperative before them; "Phase 2" or "User profile: ..." is a name).
# A report of what was done in an irregular past ("Rewrote the parser") and the verbs that ask for no work
# ("keep X as it is", "leave", "skip"): no step.
_NO_WORK = frozenset("""wrote rewrote made built rebuilt ran took gave found kept left got did saw began sent spent chose
    brought thought caught held led won hid broke forgot told understood went came became knew grew threw drove
    keep leave ignore skip enjoy""".split())  # fmt: skip
# How a Chinese step opens: a verb of work, or a word that leads into one (a preposition before its
# object, "first", "then", "still must"). General Chinese, not one project's words.
_ZH_WORK_START = re.compile(
    r"^(添加|增加|加上|加入|补充|补上|补齐|补全|编写|撰写|修改|改成|改为|更新|修复|修正|解决|处理|删除|去掉|移除|清理|"
    r"创建|新建|建立|搭建|实现|完成|完善|优化|重构|调整|替换|合并|拆分|迁移|同步|部署|上线|发布|提交|测试|验证|检查|确认|"
    r"排查|跟进|推进|接入|对接|联调|集成|配置|设置|安装|升级|整理|准备|制作|制定|设计|规划|研究|分析|评估|对比|收集|导出|"
    r"导入|上传|下载|备份|恢复|启用|禁用|开启|关闭|申请|联系|沟通|通知|发送|生成|训练|翻译|打包|监控|记录|统计|梳理|审核|"
    r"审查|落实|执行|运行|重跑|重试|引入|封装|抽取|提取|标注|归档|压测|回滚|还原|观察|等待|跟踪|追踪|拍摄|剪辑|上架|下架|"
    r"[写加改删修测跑补换装建做查找发推配调迁拆录拍填选把给在将对为让去]|先|再|继续|需要|还要|还需|请|尽快)"
)
# Words a Chinese step may open on before its work: its label or when it comes ("下一步：", "然后").
_ZH_STEP_LEAD = re.compile(r"^(下一步|接下来|然后|之后|后续|待办|最后|今天|明天|本周|下周|稍后|next steps?)\s*(是|要)?\s*[：:，,]?\s*", re.I)
_ZH_STILL_TO_DO = re.compile(r"还需要?|尚未|还没|待(?:做|办|完成|补|定|确认|实现|处理)|未完成|遗留")
_CJK_SPEAKER = re.compile(r"我(?!们|們)|私[はがも]|[你您](?!的|们|們)")  # "your X" (你的) may still be the project's
_QUOTE = re.compile(r"[\"“「『][^\"”」』]*[\"”」』]")  # what the speaker quotes is not the speaker
# A sentence that opens on its speaker ("I've created…", "Let me…") reports what they did or will do;
# one that opens on the person spoken to ("You've double-applied the changes") is about them.
_SPEAKER = frozenset("i i've i'll i'm i'd let you you've you're you'll you'd".split())
_OBJECT_START = frozenset("a an the this that these those all each every our your their its my both some any code".split())
_STILL_TO_DO = re.compile(
    r"(?i)\b(still (need|needs|have|has) to|still to (do|be)|(needs?|has|have) to be|remains? to be|left to do|"
    r"yet to be|is (not|n't) (yet )?(done|implemented|written|built|wired|tested)|not (yet )?(implemented|done))\b"
)


def words(text: str) -> list[str]:
    """Words and the punctuation that splits clauses, lower-cased, code spans left out."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(_CODE_SPAN.sub(" CODE ", text or ""))]


def fragment(text: str) -> str | None:
    """Why `text` is no statement on its own (a heading, a label, a placeholder, ...), or None."""
    flat = " ".join((text or "").replace("**", "").replace("__", "").split())
    if not flat:
        return "empty"
    if _HEADING.match(text or ""):
        return "a heading"
    if _TABLE.search(flat):
        return "a table row"
    if _LABEL_END.search(flat):
        return "a label that introduces what follows"
    if _PLACEHOLDER.search(flat):
        return "a placeholder"
    if re.search(r"[?？]\s*[\"'”’)]*\s*$", flat):
        return "a question"
    if _QUOTED.match(flat):
        return "a quotation held up as an example"
    bare = _CODE_SPAN.sub("CODE", flat)
    if bare.count("`") % 2 or bare.count("(") > bare.count(")") or bare.count("[") > bare.count("]"):
        return "cut off (an open bracket or backtick)"
    if has_cjk(flat):
        return None
    said = [w for w in words(flat) if w[0].isalnum()]
    if said and said[-1] in _OPEN_END and not flat.rstrip().endswith((".", "!")):
        return f"cut off (it ends on {said[-1]!r})"
    return None


def has_finite_verb(text: str, *, s_forms: bool = True) -> bool:
    """Does the sentence have a subject and a finite verb after it? (English, by form: an auxiliary
    or modal, a pronoun's verb, or an -ed/-s form after a word that can end a subject.)

    An -s form after a noun is as often a plural noun ("NVIDIA drivers without power management");
    `s_forms` False leaves it out and reads only the surer signs."""
    said = words(text)
    for i, word in enumerate(said):
        if i == 0:
            continue
        before = said[i - 1]
        if word.isalpha() and before in _ADVERBS and i >= 2:
            before = said[i - 2]  # "the schema still needs", "it also returns"
        if word in _FINITE:
            return True
        if not word.isalpha() or len(word) < 3:
            continue
        if before in _PRONOUNS and before not in ("this", "that", "these", "those", "there"):
            return True  # "we use", "it works", "you see"
        if before in _NOT_A_SUBJECT or not before[0].isalpha():
            continue
        if word.endswith("ed") or (s_forms and word.endswith("s") and not word.endswith(("ss", "us", "is"))):
            return True  # "the key ignored", "the function returns", "CODE returns"
    return False


def fact_flaw(text: str) -> str | None:
    """Why `text` cannot stand as a fact, or None when it is a whole statement. A phrase behind the
    cause label ("Root cause: a missing null check in `parse()`") states what the cause was."""
    why = fragment(text)
    if why is not None:
        return why
    stated_cause = text.startswith(CAUSE_LABEL)
    text = text[len(CAUSE_LABEL):] if stated_cause else text
    if has_cjk(text):
        # Its grammar is not read, but "I" and "you" are words: 我 (not 我们, "we"), 私は / 私が, 你 / 您.
        return "about the people talking (I), not a fact about the project" if _CJK_SPEAKER.search(_QUOTE.sub("", text)) else None
    if len([w for w in words(text) if w.isalpha()]) < (2 if stated_cause else 3):
        return "too short to state anything"
    if not stated_cause and not has_finite_verb(text):
        return "no subject and finite verb: a phrase, not a statement"
    if opens_on_speaker(text):
        return "about the people talking (I, you), not a fact about the project"
    said = [w for w in words(text) if w[0].isalnum()]
    if said[0] in _WORK_VERBS and said[1] not in _FINITE:
        return "an imperative: work to do, not a fact"
    return None


def opens_on_speaker(text: str) -> bool:
    """Does the sentence open on its speaker or the person spoken to ("I've created…", "Let me…",
    "You've double-applied…")? Then it is about them, not the project."""
    said = [w for w in words(text) if w[0].isalnum()]
    return bool(said) and said[0] in _SPEAKER


def step_flaw(text: str) -> str | None:
    """Why `text` is no step of work left to do, or None when it asks for work."""
    why = fragment(text)
    if why is not None:
        return why
    if has_cjk(text):
        return _chinese_step_flaw(text) if is_chinese(text) else None
    return _english_step_flaw(text)


def _english_step_flaw(text: str) -> str | None:
    said = [w for w in words(text) if w[0].isalnum()]
    if not said:
        return "no words"
    first = said[0]
    if first in _NO_WORK:
        return "a report of what was done, or no work at all"
    if first in _WORK_VERBS or (first[:2] in ("re", "un", "de") and first[2:] in _WORK_VERBS):
        return None
    if first.isalpha() and not first.endswith(("ed", "ing")) and len(said) > 1 and said[1] in _OBJECT_START:
        return None
    if _STILL_TO_DO.search(_CODE_SPAN.sub("CODE", text)) and has_finite_verb(text):
        return None
    return "neither an imperative nor a sentence saying what is still to do"


def _chinese_step_flaw(text: str) -> str | None:
    flat = re.sub(r"^\s*(?:[-*•]|\d+[.)、])\s*", "", " ".join(text.replace("**", "").split()))
    if _ZH_STILL_TO_DO.search(flat):
        return None
    rest = flat
    while (lead := _ZH_STEP_LEAD.match(rest)) and lead.end():
        rest = rest[lead.end():]
    if _ZH_WORK_START.match(rest.lstrip("`")) or re.match(r"[A-Za-z]", rest) and _english_step_flaw(rest) is None:
        return None
    return "neither work to do nor a sentence saying what is still to do"
