"""A session's outcome, read from Claude's last message without Claude: done, root causes, next steps.

What the outcome holds becomes memory the briefing asserts: a root cause is
kept as a fact, a next step stays open until later work does it. So each is
read strictly:

- **Root causes** are about the project: under a label ("Root cause:", "原因は")
  whatever the wording, otherwise a sentence with a cue ("because", "caused by",
  "turned out") that names something in the code (`backticks`, a path, a
  function or a dotted name). Never the agent narrating its process ("the
  Reproducer confirmed …, the Debugger identified …").
- **Next steps** are work the session left undone: the items under a "Next
  steps:" heading or label, or a sentence that says something is still to do
  ("still needs", "not yet", "remains to be", "TODO"). An agent's plan for
  what it does next ("the next step is to have the Tester verify …", "I'll
  now run …", "let me …") is never one.
- **Done** is what the message says was done ("Fixed …", "I added …", a
  "Done:" list): the session line shows it, and a later session's done closes
  earlier next steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory_anchor.worker.memory.cues import BULLET, HEADING, _any, clean_sentence, sentences
from memory_anchor.worker.memory.form import CAUSE_LABEL, fact_flaw, has_finite_verb, step_flaw


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    root_causes: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.done or self.root_causes or self.next_steps)


_ROOT_CAUSE = _any(
    r"\b(root cause|the cause (was|is)|caused by|was due to|is due to|because|the (bug|problem|issue|failure) (was|is)|"
    r"turned out|the culprit)\b",
)
# CJK cause and step cues read as labels ("原因是…", "下一步…"): they name their kind as plainly as a heading.
_CJK_ROOT_CAUSE = _any(
    r"根本原因|根因|原因是|原因在于|问题出在|是因为",
    r"根本原因|原因は|原因でした|が原因",
    r"근본 원인|원인은|원인이",
)
_LEFT_UNDONE = _any(
    r"\b(still (need|needs|have|has) to|still to (do|be)|not (yet|done yet)|(remain|remains) to be|left to do|yet to be|"
    r"todo|to-do|follow[- ]?up (is|are|needed|required)|open question)\b",
)
_CJK_LEFT_UNDONE = _any(
    r"下一步|后续|待办|还需要|尚未|遗留",
    r"次のステップ|今後の課題|残タスク|未対応",
    r"다음 단계|남은 작업|할 일|추후|후속",
)
_DONE = _any(
    r"^(i |i've |i have |we |we've |we have )?(fixed|added|implemented|updated|removed|renamed|refactored|created|"
    r"migrated|wrote|changed|moved|replaced|deployed|released|merged|bumped|upgraded|made|set up|configured)\b",
    r"^(done|completed|summary|changes|what i did)\b",
    r"已完成|完成了|修复了|已修复|已经|改好了|搞定",
    r"完了|修正しました|直しました|対応しました|追加しました|実装しました",
    r"완료|수정했|고쳤|추가했|구현했",
)
# The agent talking about its own process: roles and hand-overs, reproducing and verifying, the plan.
_ROLES = r"\b(tester|debugger|programmer|reproducer|manager|reviewer|planner|coder|agent|assistant|team members?)s?\b"
_PROCESS = _any(
    _ROLES,
    r"\b(reproduc\w*|confirm(s|ed|ing)?|verif(y|ied|ies|ying|ication)|identified|investigat\w*|debugg(ed|ing)|"
    r"(the|our|my|this) (plan|task|team|workflow|process)\b|submit\w*|hand(ed|ing)? (it )?(off|over)|"
    r"forward(ed|ing)? (it|the)|it is now appropriate|according to the plan|as planned)",
)
# The agent's next move, not work left undone: "the next step is to …", "I'll …", "let me …".
_PLAN = _any(
    _ROLES,
    r"^(the )?next step (is|will be) to\b|^(now |next,? |then,? )?(i|we)('ll| will| am going to| are going to| can now)\b|"
    r"^let('s| me| us)\b|^(now|next|then),? (i|we|let)\b|\b(i|we) (ran|tested|checked|looked|traced|searched|opened|read|tried)\b",
)
# A guess or a condition is no root cause: "if that works, the issue is in X", "it might be the cache".
_GUESS = _any(r"^(if|unless|maybe|perhaps|probably|possibly|hopefully)\b",
              r"\b(might|may be|could be|probably|likely|possibly|seems?|appears? to|i think|i suspect|i guess)\b",
              r"^(如果|假如|要是|若是|万一)|可能|也许|或许|大概|似乎|好像|估计")
# A cause of people at large ("Many people give up on X because…"): advice, not a finding about the project.
_OF_PEOPLE_AT_LARGE = _any(r"^(many|most|a lot of|lots of) (people|users|developers|teams)\b",
                           r"^(很多人|许多人|大多数人|不少人|大部分人)")
# A cause of the moment, not of the project: why tests written first fail until the code catches up
# ("These tests will currently fail because the implementation returns null"), true only then.
_OF_THE_MOMENT = _any(r"\b(currently|right now|at the moment|for now)\b.{0,40}\b(fail|failing|break|broken)\b",
                      r"\b(will|would) (currently )?fail\b|\b(are|is) (currently )?expected to fail\b")
# A cause whose subject is what came before it ("This is because…", "Those are unrelated…", "Same root
# cause in…", "这是因为…", "两者的相似之处…"), or a reason without what it explains ("Because X only
# receives…"): alone, the fact would not say what it is about.
_REFERS_BACK = re.compile(r"(?i)^(?:(?:this|that|it)(?: is|'s| was)? (?:because|due to|caused by)\b|"
                          r"(?:this|that|these|those|they|it) (?:is|are|was|were|works?|worked|fails?|failed|happens?|happened)\b|"
                          r"(?:that|it)['’]s\b|"
                          r"(?:same|such|because)\b|"
                          r"(?:这|那|这个|那个)(?:是|也是|都是)?(?:因为|由于)|(?:两者|二者|同样|这些|那些))")  # fmt: skip
# A thing in the code: `backticks`, a path with an extension, call(), a dotted.name, snake_case or CamelCase.
_CODE_ANCHOR = re.compile(r"`[^`]+`|\b[\w./-]+\.[a-z]{1,5}\b|\b\w+\(\)|\b[a-z_]\w*\.[a-z_]\w+|\b[a-z]+_[a-z_]+\b|"
                          r"\b[A-Z][a-z]+[A-Z]\w*\b")  # fmt: skip
_HEADINGS = [
    ("root_cause", re.compile(r"(?i)^(root causes?|causes?|why it (failed|broke|happened)|diagnosis|根本原因|根因|原因|원인|근본 원인)$")),
    ("next_step", re.compile(r"(?i)^(next steps?|next|todo|to do|follow[- ]?ups?|remaining( work)?|open items|left to do|"
                             r"not (yet )?done|下一步|后续|待办|接下来|次のステップ|次に|今後|残タスク|다음 단계|남은 작업|할 일)$")),  # fmt: skip
    ("done", re.compile(r"(?i)^(done|changes( made)?|fixed|what i did|summary|completed|"
                        r"已完成|完成|变更|修改|完了|変更|対応内容|완료|변경)$")),  # fmt: skip
]


def session_outcome(message: str) -> Outcome:
    """What was done, the root causes and the next steps in a session's last message."""
    outcome = Outcome()
    heading_kind: str | None = None
    after_heading = False
    in_section = False  # under a markdown heading of a kind: it lasts until the next heading or rule
    in_fence = False
    how_to_depth: int | None = None  # the indent of a step whose sub-items say how to do it
    for raw in (message or "").splitlines():
        line = raw.strip()
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        # Code, and text quoted from a file, a tool or a person, is theirs: no outcome of the session.
        if not line or in_fence or line.startswith(">"):
            continue
        section = _MD_HEADING.match(line)
        if section or _RULE.match(line):
            heading_kind = _section_kind(section.group(1)) if section else None
            in_section, after_heading = heading_kind is not None, heading_kind is not None
            continue
        is_bullet = bool(BULLET.match(raw))
        depth = len(raw) - len(raw.lstrip())
        if how_to_depth is not None and is_bullet and depth > how_to_depth:
            continue  # "2. Test the feature:" then "- Go to Employees → Departments": one step, not four
        how_to_depth = None
        heading = HEADING.match(line.replace("**", ""))
        kind = _heading_kind(heading.group(1)) if heading and not is_bullet else None
        if in_section and heading and not is_bullet and kind is None and not heading.group(2).strip():
            if has_finite_verb(heading.group(1)):  # "This might be:" lists guesses, not the section's items
                heading_kind, in_section = None, False
            else:  # a label that groups the section's items ("Quick wins:"): still the section
                after_heading = True
                continue
        if kind is not None:
            rest = heading.group(2).strip()
            heading_kind, after_heading = kind, not rest  # "Next steps:" heads a list; "Root cause: X" does not
            if rest:
                _add_labelled(outcome, kind, rest)
                heading_kind = None if not raw.rstrip().endswith((":", "：")) else kind
            continue
        if in_section and not is_bullet and not after_heading and line.rstrip("*_ ").endswith((":", "：")):
            heading_kind, in_section = None, False  # a paragraph that introduces a list of its own
        if not is_bullet and not after_heading and not in_section:
            heading_kind = None  # a paragraph ends the list under a heading
        # In a markdown section the list is the section's; a paragraph after it speaks for itself.
        line_kind = None if in_section and not is_bullet and not after_heading else heading_kind
        after_heading = False
        if is_bullet and line_kind == "next_step" and line.rstrip("*_ ").endswith((":", "：")):
            step = BULLET.sub("", line).replace("**", "").rstrip(" :：")
            if step_flaw(step) is None:  # an imperative that heads its own how-to, not a label of a group
                _add(outcome, "next_step", step, labelled=True)
                how_to_depth = depth
                continue
        for sentence in sentences(line):
            labelled = HEADING.match(sentence)
            label_kind = _heading_kind(labelled.group(1)) if labelled and labelled.group(2).strip() else None
            if label_kind is not None:  # "… . Root cause: X. Next step: Y." mid-paragraph: keep X and Y, not their labels
                _add(outcome, label_kind, labelled.group(2), labelled=True, behind_label=True)
                continue
            if line_kind is not None:
                _add(outcome, line_kind, sentence, labelled=True)
                continue
            kind = _kind_of(sentence)
            if kind is not None:
                _add(outcome, kind, sentence, labelled=False)
    outcome.done = _dedupe(outcome.done)[:6]
    outcome.root_causes = _dedupe(outcome.root_causes)[:4]
    outcome.next_steps = _dedupe(outcome.next_steps)[:8]
    return outcome


def _add_labelled(outcome: Outcome, kind: str, text: str) -> None:
    """What follows a label, up to the next label in the same line: "Root cause: X. Next step: Y."
    is a root cause X and a next step Y (as Claude Code's own sessions end), not one root cause."""
    parts: list[tuple[str, list[str]]] = [(kind, [])]
    for sentence in sentences(text):
        labelled = HEADING.match(sentence)
        label_kind = _heading_kind(labelled.group(1)) if labelled and labelled.group(2).strip() else None
        if label_kind is not None and parts[-1][1]:
            parts.append((label_kind, [labelled.group(2).strip()]))
        else:
            parts[-1][1].append(sentence)
    for part_kind, said in parts:
        if said:
            _add(outcome, part_kind, " ".join(said), labelled=True, behind_label=True)


def _heading_kind(label: str) -> str | None:
    label = label.strip().strip("#*_ ")
    return next((kind for kind, pattern in _HEADINGS if pattern.match(label)), None)


_FENCE = re.compile(r"^(```|~~~)")
_MD_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_RULE = re.compile(r"^(-{3,}|\*{3,}|_{3,})$")


def _section_kind(title: str) -> str | None:
    """The kind of a markdown section by its title, emoji, numbering and asides left out:
    "## 📋 Still To Do (Minimal)" heads next steps, "### Root Cause" root causes."""
    title = re.sub(r"\([^)]*\)", " ", title.replace("**", ""))
    title = " ".join(re.sub(r"[^\w\s'’/-]", " ", title).split()).strip(" -")
    title = re.sub(r"^\d+[.)]?\s+", "", title)
    kind = _heading_kind(title)
    if kind is not None:
        return kind
    if re.search(r"(?i)\broot causes?\b", title):
        return "root_cause"
    if _LEFT_UNDONE.search(title) or re.search(r"(?i)\bnext steps?\b|\bremaining\b|\bwhat'?s left\b", title):
        return "next_step"
    return None


def _kind_of(sentence: str) -> str | None:
    """The kind of an unlabelled sentence, judged by what it says and how (not by the words of
    the code or names it quotes: "`Preview (not yet accessed)`" says nothing is left)."""
    sentence = re.sub(r"`[^`]*`", "`…`", sentence)
    if _CJK_ROOT_CAUSE.search(sentence):
        return "cjk_root_cause"
    if _ROOT_CAUSE.search(sentence):
        return "root_cause"
    if _CJK_LEFT_UNDONE.search(sentence) or _LEFT_UNDONE.search(sentence):
        return "next_step"
    if _DONE.search(sentence.strip()):
        return "done"
    return None


def is_narration(text: str) -> bool:
    """Does the text narrate the agent's process (its roles, steps and plan) rather than the project?"""
    return bool(_PROCESS.search(text) or _PLAN.search(text))


def is_plan(text: str) -> bool:
    """Is the text the agent's own next move rather than work left for later?"""
    return bool(_PLAN.search(text))


def names_code(text: str) -> bool:
    return bool(_CODE_ANCHOR.search(text))


def _add(outcome: Outcome, kind: str, text: str, *, labelled: bool, behind_label: bool = False) -> None:
    """`labelled`: under a label or a heading of its kind; `behind_label`: after one on its own line
    ("Root cause: X"), where X may be a phrase the label makes a statement of."""
    said = text.strip()
    text = clean_sentence(text)
    if len(text) < 6:
        return
    if kind == "cjk_root_cause":
        kind, labelled = "root_cause", True
    if kind == "root_cause":
        # "**Root Cause**: NVIDIA drivers without suspend configuration" is a phrase its label makes a
        # statement of: kept with the label, or it would read as a fragment (or be read as one). The
        # label is English: a cause in another language keeps its own words only.
        stated = CAUSE_LABEL + text if behind_label and text.isascii() and not has_finite_verb(text, s_forms=False) else None
        # A cause is kept as a fact: a whole sentence, stated plainly, about the project.
        if (is_narration(text) or not (labelled or names_code(text)) or _GUESS.search(text) or fact_flaw(stated or said)
                or _OF_THE_MOMENT.search(text) or _REFERS_BACK.match(text) or _OF_PEOPLE_AT_LARGE.search(text)):
            return
        outcome.root_causes.append(stated or text)
    elif kind == "next_step":
        if is_plan(text) or step_flaw(said):
            return
        outcome.next_steps.append(text)
    else:
        outcome.done.append(text)


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
