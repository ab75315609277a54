"""The user's standing instructions, decisions and preferences, read from a prompt without Claude.

The briefing tells Claude to follow every rule it lists, so a rule must be one
the user gave, as a lasting instruction, in their own words. Two tests decide:

1. **Where the sentence stands** (`user_words.own_words`): never in Claude Code's
   own text, never in pasted material (an issue, a log, code, a document), and
   in a long prompt only in the user's opening or closing paragraph.
2. **How it is said.** A word like "always", "never" or "instead of" is not
   enough: "It always seems to be /Users which is last" describes, "URLField
   throws ValueError instead of ValidationError" reports. An English sentence
   counts only in the form of an instruction addressed to the assistant or a
   convention of the team: an imperative with "always"/"never", a prohibition,
   "from now on …", "you/we should always …", "make sure to … before …",
   "we use/deploy with …", "decision: …", "let's use X instead of Y", "I prefer
   …". Questions, one-off requests ("for now", "this time", "yet"), replies that
   pick an option ("let's go with the second one"), conditions ("if we drop
   …"), narration ("I have a project where I never …") and fragments (a
   heading, a clause ending in ":", a sentence cut off) never do. Most people
   seldom say "always": "make sure that X updates Y", "be sure to also use X", "ensure to …",
   an imperative or "i want you to …" with a lasting scope said anywhere
   ("throughout sessions", "each time", "when possible", even mistyped "eqch
   time"), "X must be …" of a thing, "let's have one X for …", "I want to have
   X that …", "X runs from /path". Read per sentence, per sentence the user ran
   together without a capital, and per clause with its own subject inside a
   longer one ("update the docs and i also want you to …"). Design decisions
   said in the first person ("I like the names X for Y", "I'm leaning towards
   X", "I still want to use X") are said once; what follows the user thinking
   aloud ("I'm trying to think … the big idea is …") is a design still in talk.
   A prohibition of a whole kind of thing ("dont use hooks", "don't give me any
   plans") is said once; intensifiers ("dont fkn …") are read past.
   What the user asks to be kept ("save in your memory …", "remember that …",
   "put this in CLAUDE.md: …") is said plainly, whatever its grammar.
   Chinese, Japanese and Korean keep their cue words (以后, 今後, 앞으로, …),
   under the same tests of place, question and one-off; a Chinese question
   needs no question mark (吗 ending a clause, 是否, 什么), and a sentence about
   a third person (他的…, 用户问…, 我应该…) is another model's reasoning pasted.

Confidence follows the fact layer's tiers (docs/memory-model.md): said plainly, 0.95 (active, briefed); a
convention in passing, 0.9; hedged, or one of the forms above that are usually
but not always lasting, 0.75 (HEDGED): pending, and briefed in the user's words
with its date as said once, not yet confirmed (context/knowledge.py); a choice
in a reply to Claude's question, 0.7 (REPLY): it waits for approval, unbriefed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory_anchor.worker.capture.transcript import memory_input
from memory_anchor.worker.memory.cue_languages import Language, cued_instruction, language_of
from memory_anchor.worker.memory.cues import (
    MAX_STATEMENT_CHARS,
    CJK_DECISION,
    CJK_PREFERENCE,
    CJK_RULE,
    CJK_WANTS_ONCE,
    HEDGE,
    ONE_OFF,
    QUESTION,
    clean_sentence,
    has_cjk,
    is_chinese,
    replaced_terms,
    sentences,
)
from memory_anchor.worker.memory.user_words import own_words

PLAIN = 0.95  # said plainly: the briefed ("active") tier (>= 0.9)
USUAL = 0.9  # a convention stated in passing ("we deploy with …")
# Said once in a form that is usually, not always, a lasting instruction ("make sure …", "be sure to
# also …", "X must …", "i want you to … throughout sessions"): pending, and briefed as the user's own
# words with their date, marked "said once, not yet confirmed" (context/knowledge.py), until a person
# approves it or says it again.
HEDGED = 0.75
# A reply that picks what Claude proposed ("lets use createdAt" after "createdAt or updatedAt?"):
# pending too, but it settles the matter at hand, so it waits in Approvals and is never briefed.
REPLY = 0.7


@dataclass
class Statement:
    kind: str  # rule | decision | preference
    text: str
    confidence: float
    replaces: list[str] = field(default_factory=list)  # what it supersedes ("instead of Y", "不再用 Y")


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# What a team decides to do with a tool or design: "we'll stick with X", "let's switch to Y".
_WE_DECIDE = r"(?:use|go with|switch to|stick (?:with|to)|keep|move to|adopt|stay (?:on|with)|standardi[sz]e on)\b"
# Words before the instruction that change nothing: "btw", "also", "please", "oh and", "one more thing:".
_LEAD_IN = _re(rf"^(?:(?:ok(?:ay)?|also|and|but|so|btw|by the way|oh|one more thing|another thing|note|fyi|hey|no(?=\s+(?:don'?t|do not|never)\b)|"
               r"thanks?(?: you)?|important|remember this|rule|please|pls|just|yes|yeah|right|great|good|cool|"
               rf"nb|ps|p\.s\.|fuck(?: me)?|damn|dude|man|jeez|ugh|wtf|omg|seriously|no,|nope|well(?!\s+{_WE_DECIDE})|actually|honestly|basically|"
               r"i think(?: that)?|i guess|i feel like|critically|crucially|importantly)(?:\b|(?<=,))[,:;!.\s-]*)+")  # fmt: skip
# A frame that makes what follows last: "from now on, …", "in this repo, …", "whenever you commit, …".
_LASTING_FRAME = _re(
    r"^(?:from now on|going forward|moving forward|in (?:the )?future|henceforth|from here on(?: out)?|"
    r"for (?:all|every|any) (?:future )?\w+(?: \w+)?|in (?:this|our|the) (?:project|repo(?:sitory)?|codebase|code base|team)|"
    r"(?:every|each) time(?: (?:you|we) [^,]+)?|whenever (?:you|we) [^,]+|"
    r"(?:when|before|after|once) (?:you|we) (?:commit|push|merge|release|deploy|write|add|create|open|change|edit|"
    r"touch|finish|run|make|start|end)[^,]*|"
    # "when I ask where, I need file paths", also unpunctuated: the frame ends where the user's want begins
    r"when(?:ever)? i (?:ask|say|type|write|mention|request|tell)\b[^,]*?(?=,|:|\s+(?:i|you)\s+(?:need|want|expect|should|must|always|never)\b|$))\s*[,:]?\s*"
)
# Said to hold until the user changes it, even when it also says "for now".
_UNTIL_CHANGED = _re(r"\buntil (?:(?:i|we) (?:say|tell you|decide) otherwise|told otherwise|further notice|(?:i|we) change (?:it|that|this))\b")
_ALWAYS_NEVER = _re(r"^(?:always|never)\b(?!\s+mind\b)")
_PROHIBITION = _re(r"^(?:(?:do not|don'?ts?|never ever|please don'?t|pls don'?t)\s+(?:ever\s+)?)([a-z]+)")
# A prohibition of a whole kind of thing, the bare plural ("don't use hooks", "dont add emojis"): not of one
# thing at hand ("don't use that", "don't add the test").
_NO_KIND_OF = _re(r"^(?:do not|don'?ts?|please don'?t|pls don'?t)\s+(?:(?:use|add|create|write|put|import|make|leave)\s+(?:any\s+)?|"
                  r"(?:give|show|send|write)\s+(?:me|us)\s+any\s+)"
                  r"(?!this\b|these\b|those\b|that\b|them\b|it\b|the\b|a\b|an\b|my\b|your\b)[a-z_-]+s(?=$|\s*,)")
_STOP_DOING = _re(r"^(?:stop|quit|no more)\s+\w+ing\b|^no more\s+\w+")
_MODAL_WE_YOU = _re(r"^(?:you|we)\s+(?:should|must|need to|have to|shall|are to|'ll|will)\s+(?:always|never|not ever)\b"
                    r"|^(?:you|we)\s+(?:always|never)\s+(?!seem|get|got|had|have been)\w+")  # fmt: skip
_WANT_YOU = _re(r"^i(?:'d| would)? (?:want|like|need) you to (?:always|never)\b|^i don'?t want you to (?:ever )?\w+")
_MAKE_SURE = _re(r"^(?:make sure|be sure|ensure (?=to|that)|remember|don'?t forget)\b")
_WHEN_WORDS = _re(r"\b(?:always|never|every|each|whenever|before (?:you |we )?\w+|after (?:you |we )?\w+|"
                  r"any ?time|all (?:the )?\w+s)\b")  # fmt: skip
_THING_MUST = _re(r"^(?!(?:it|this|that|these|those|there|which|he|she|they|i|one)\b)[\w`'\".-]+(?: [\w`'\".-]+){0,5}\s+"
                  r"(?:should|must|shall|need to|has to|have to)\s+(?:always|never|not ever)\b")  # fmt: skip
_DECISION_LABEL = _re(r"^(?:decision\s*:|decided\s*:|we(?:'ve| have)? decided\b)")
# "well stick with …" is "we'll" without its apostrophe: "well" before such a verb is no lead-in (_LEAD_IN).
_WE_WILL_USE = _re(rf"^(?:let'?s|let us|we'?ll|well|we will|we'?re going to|we are going to|we should)\s+{_WE_DECIDE}")
_USE_X_NOT_Y = _re(r"^(?:use|prefer|pick|choose|go with|stick (?:with|to))\s+.+?\s*(?:\binstead of\b|\brather than\b|\bover\b|,\s*not\b|\bnot\b)")
_WE_CONVENTION = _re(r"^(?:we|our team|the team)\s+(?:use|deploy|host|ship|release|format|lint|target|support|follow|"
                     r"require|prefer|name|write|store|log|version|tag|build|test|run|treat|consider|view|count|define|call)\s+(?:\w+\s+){0,2}?"
                     r"(?:with|to|on|using|via|in|through|as|our|the|\S*[A-Z.\d`]\S*)")  # fmt: skip
# Where things go: "… should live in `systems/nixos/default.nix`", "tests go under tests/unit".
_BELONGS_IN = _re(r"^(?!(?:it|this|that|these|those|there|which|he|she|they|i|one)\b).{3,120}?\b"
                  r"(?:(?:should|must|shall|always) (?:live|go|belong|be (?:kept|placed|stored|defined|put))|lives|goes|belongs)\s+(?:in|under|inside|into)\s+`?[\w.-]*/[\w./-]*`?")  # fmt: skip
# What the user wants, said inside a lasting frame ("when I ask where, I need file paths"); "I need to …" is their own task.
_I_WANT = _re(r"^i\s+(?:need|want|expect|(?:'d|would) like)\s+(?!to\b|it\b|this\b|that\b)\w")
# The user's own way of working, said of a tool: "I use direnv to set up the dev shell", "I use uv for packaging".
# Not when the sentence goes on to report a problem ("… but it returns None") or names no tool ("I use it for …").
_I_USE = _re(r"^i\s+(?:always\s+|usually\s+|normally\s+)?use\s+(?!it\b|this\b|that\b|these\b|those\b|them\b|the same\b|all\b)"
             r"\S+(?:\s+\S+){0,3}?\s+(?:to|for|as)\s+\w")
_REPORTS_A_PROBLEM = _re(r"\b(?:but|however|although|though|except|yet|until|fails?|failing|breaks?|broken|error|crash(?:es)?)\b")
_YOU_MUST = _re(r"^you\s+(?:should|must|need to|have to)\b")
_PREFER = _re(r"^(?:i|we)(?:'d| would)?\s+(?:prefer|rather)\b|^prefer\s+\S|^(?:i'?m|we'?re|i am|we are) not (?:a )?fans? of\b")
# --- instructions without "always" or "never" -----------------------------------------------------------
# A lasting scope said anywhere in the sentence: what turns "update the docs" (a task) into a way of working.
# Not "automatically" or "by default" (they describe what a feature does: "make it start automatically"),
# nor "throughout" a thing ("rename it throughout the codebase" is one task): throughout the work itself.
_HABIT = (r"always|never|every ?time|each time|every (?:session|change|commit|release|run|step|feature|time)|"
          r"each (?:session|change|commit|release|run|step|feature)|whenever|from now on|going forward|moving forward|"
          r"throughout (?:the |every |each |all |our |my )?(?:sessions?|conversations?|chats?|the day|work)|proactively|"
          r"at all times|in (?:the )?future|from here on|not (?:just|only) when|"
          r"(?:when(?:ever)?|where(?:ever)?|if) (?:possible|needed|neede?d?|necessary|useful|appropriate|relevant|applicable)|"
          r"as (?:needed|necessary|appropriate|you go)")  # fmt: skip
_SCOPE = _re(rf"\b(?:{_HABIT})\b")
# Said of a state kept up ("it should be consistently updated"), these last too; after a bare imperative
# they describe the task ("format the dates consistently").
_KEPT_UP = _re(rf"\b(?:{_HABIT}|consistently|continuously|continually|constantly|dynamically)\b")
# The scope words people mistype, one letter off ("eqch time", "allways", "evry"), read as they meant them.
_SCOPE_WORDS = ("always", "never", "each", "every", "whenever", "throughout", "consistently", "proactively")
_NOT_TYPOS = frozenset({"ever", "even", "eve", "each", "every", "nerve", "aways", "reach", "teach", "beach", "eaten"})
# "i want you to …", "i'd like you to …", "i need you to …": a request, lasting only with a scope.
_WANT_YOU_TO = _re(r"^i\s+(?:also\s+|really\s+|just\s+)?(?:want|need|would like|'d like|wan?t)\s+(?:you|u)\s+to\s+\w")
# Permission with a scope: "you can launch parallel tasks when possible", "feel free to … whenever".
_MAY = _re(r"^(?:you|u|we)\s+(?:can|may|could|are (?:free|allowed|welcome) to)\s+(?:also\s+|always\s+)?\w+|^feel free to\s+\w")
_MODAL = _re(r"^(?:you|u|we)\s+(?:should|must|need to|have to|shall|are to)\s+(?:also\s+|still\s+)?\w+")
# A requirement on a thing: "conversations must be correctly focused", "the UI must support mobile".
# Not an inference ("the bug must be in the parser", "it must have been the cache"): a pronoun or
# "there" as its subject, or "must" followed by what a guess says (be in/a/the/from, have + participle).
# Subjects that are no named thing: a requirement on one of these is about the matter at hand.
_NOT_A_NAMED_THING = r"it|this|that|these|those|there|which|he|she|they|i|one|you|we|what|who|something|someone"
_THING_MUST_DO = _re(rf"^(?!(?:{_NOT_A_NAMED_THING})\b)"
                     r"(?:(?:the|our|all|every|each|any|my)\s+)?[\w`'\".-]+(?:\s+[\w`'\".-]+){0,4}?\s+must\s+"
                     r"(?:not\s+|also\s+|still\s+)?"
                     r"(?!be\s+(?:in|on|at|a|an|the|from|because|due|caused|coming|somewhere|something|related|why|what|that)\b)"
                     r"(?!have\s+(?:been|\w+ed|\w+en)\b)\w+")  # fmt: skip
# The same said of "it"/"this" with a lasting scope: "it should be a consistently updated picture".
_IT_SHOULD_LAST = _re(r"^(?:it|this|that|they|these)\s+(?:should|must|needs? to|has to|have to)\s+(?:always\s+|also\s+|still\s+)?\w+")
# "let's have one notebook for planning and another for the project": a decision, not "let's have a look".
_LETS_HAVE = _re(r"^(?:let'?s|let us|we'?ll|we will)\s+have\s+(?!a\s+(?:look|go|try|think|peek|quick|chat|break|call|meeting)\b)"
                 r"(?:one|two|a|an|the|separate|distinct|\w+s)\b.{3,}")  # fmt: skip
# "i want to have a progress file per domain that holds …": an arrangement the user wants kept.
_WANT_TO_HAVE = _re(r"^i\s+(?:also\s+)?(?:want|need|would like|'d like)\s+(?:to have|there to be)\s+"
                    r"(?!a\s+(?:look|go|try|think|peek|quick|chat|break|call|meeting)\b).{3,}?(?:\s+(?:that|which|where|so)\s+\w|,\s*not\b)")  # fmt: skip
# Where something of the project lives or runs, said with its path: "siyuan runs from /srv/siyuan".
_RUNS_FROM = _re(r"^(?!(?:it|this|that|these|those|there|which|he|she|they|i|you|we)\b)[\w`'\".-]+(?:\s+[\w`'\".-]+){0,3}?\s+"
                 r"(?:runs?|lives?|sits?|(?:is|are)(?:\s+(?:located|installed|hosted|mounted|kept|stored|deployed|running))?)\s+"
                 r"(?:from|in|at|under|on)\s+`?(?:~?/[\w.-]+/[\w./-]*|https?://\S+)")  # fmt: skip
# What makes a permission last: "when possible", "as needed", "always" ("whenever best" schedules one thing).
_MAY_SCOPE = _re(r"\b(?:when(?:ever)? (?:possible|needed|useful|appropriate|necessary|relevant|you (?:can|want|need|like))|"
                 r"(?:as|if) (?:needed|necessary|useful|appropriate)|always|every ?time|each time|by default|any ?time)\b")
# A request about the matter at hand: "deal with that", "fix this", "look at it".
_ABOUT_THIS = _re(r"^\S+\s+\S+\s+(?:\S+\s+)?(?:with\s+|at\s+|on\s+)?(?:that|this|it|these|those|them)\b")
# What a "make sure" checks now rather than asks to keep: a state ("make sure siyuan is up to date").
_CHECKS_A_STATE = _re(r"^(?:(?:make|be) sure|ensure)(?: that)?\s+(?:\S+\s+){1,4}?(?:is|are|was|were|works?|passes|pass|runs|builds|compiles|"
                      r"loads|exists|has been|have been|looks|matches|got)\b")  # fmt: skip
# Work steps: "lets move to phase 4" goes on with the work; it sets nothing that lasts.
_WORK_STEP = _re(r"\b(?:move|go|get|jump|skip|proceed|continue|switch)\s+(?:on\s+)?(?:to|with)\s+(?:the\s+)?(?:next\b|phase|step|stage|part|"
                 r"task|item|section|chapter|milestone|round|issue|ticket|bug|point|#?\d)")  # fmt: skip

# Reasons a sentence that looks like an instruction is not a standing one.
_CONDITION = _re(r"^(?:if|unless|although|though|as far as|assuming|given that|in case|since|because|while)\b")
_NARRATIVE = _re(r"\b(?:was|were|had|did|has been|have been|used to|seems?|seemed|appears?|appeared|looks like|turned out|"
                 r"happens?|happened|i noticed|i found|i saw|i tried|i have a|we have a|i had|we had)\b")  # fmt: skip
_PICKS_AN_OPTION = _re(r"\b(?:option|approach|alternative|plan|choice|variant|solution|proposal)\s*(?:#?\d+|[a-d]\b|one|two|three)|"
                       r"\bthe (?:first|second|third|last|other|former|latter|same|previous|above|below)\b(?:\s+(?:one|option|approach|way|version))?|"
                       r"\b(?:that|this|the) one\b|\b(?:yours|mine)\b")  # fmt: skip
_TASK_BOUND = _re(r"\b(?:yet|for now|this time|right now|at the moment|for the moment|today|temporarily|in this (?:pr|commit|task|"
                  r"session|change|branch|file|function|test|step)|this (?:pr|commit|file|function|test|branch)|these (?:files|tests)|"
                  r"(?:it|them|those|this|that|these)(?:\s+(?:too|as well))?\s*$)\b")  # fmt: skip


def standing_statements(prompt: str, *, answers_a_question: bool = False) -> list[Statement]:
    """The standing instructions, decisions and preferences in a prompt's own words.

    `answers_a_question`: the prompt replies to a question Claude asked ("Which
    do you prefer?"). A reply picks for the matter at hand: only what it says
    plainly will last ("always …", "from now on …") stands; a choice there
    ("let's use X") waits for a human's approval and is not briefed (REPLY); an
    instruction it adds ("yes. also be sure to …") is said once (HEDGED).
    """
    kept_by_shortcut = memory_input(prompt)
    if kept_by_shortcut:
        return [_kept(clean_sentence(kept_by_shortcut))]
    out: list[Statement] = []
    listing = False  # after "put these principles in CLAUDE.md:", each item is one
    for paragraph in own_words(prompt):
        for sentence in sentences(paragraph):
            kept = _to_keep(sentence)
            if kept == "":
                listing = True
                continue
            if listing and kept is None and not is_fragment(sentence) and not is_question(sentence):
                kept = clean_sentence(_NUMBERED.sub("", sentence))
            statement = _kept(kept) if kept else (_named_to_keep(sentence) or _statement(sentence))
            if statement is not None and answers_a_question and statement.confidence < PLAIN:
                statement.confidence = REPLY if statement.kind == "decision" else min(statement.confidence, HEDGED)
            if statement is not None:
                out.append(statement)
    return _unique(out)


# What the user asks to be kept for later: "save in your memory …", "remember that …", "记住 …", "写进 CLAUDE.md".
# Said of memory itself, it is a lasting instruction whatever its grammar ("save memory we are on odoo 18").
_MEMORY = r"(?:m[eo]m[oe]?r(?:y|ies)|claude\.md|agents\.md)"
# Not memory as in RAM: "keep it in memory", "to save memory" (no "your"/"the" before it, or a purpose).
_KEEP_IT = _re(rf"\b(?:save|store|put|keep|add|write|note|record)\b(?:\s+(?:it|this|that|these|those|them))?(?:\s+for (?:the )?future)?"
               rf"\s+(?:in|to|into|on)\s+(?:your|the|my|teh|ur)\s+{_MEMORY}\b(?:\s+(?:please|pls|too|also))?|"
               rf"\b(?:save|add|write|put)\b(?:\s+(?:it|this|that|these|those|them))?\s+(?:in|to|into)\s+(?:claude|agents)\.md\b|"
               rf"(?:^|,\s*|\b(?:and|also|please|pls)\s+)save\s+(?:(?:it|this|that)\s+)?(?:in\s+)?m[eo]m[oe]?ry\b(?=\s*[:-]?\s+(?:please\s+)?\w+\s+\w+\s+\w+|\s*[,.!]?\s*$)|"
               r"^(?:please\s+)?remember\s+(?:that|this)\b[\s,:]*")  # fmt: skip
_KEEP_IT_CJK = re.compile(rf"(?i)记住|记下来|(?:更新|写|加|添加|输入|保存|存|记)[^，,。；]{{0,4}}?{_MEMORY}|(?:记忆|{_MEMORY})(?:文件)?(?:中|里)?(?:输入|写入|写|加入|添加|加上)")


# What opens the thing to keep after the request: "… that we deploy with compose", "…: tests run with …".
_KEPT_OPENS = _re(r"^\s*(?:that|:)\s+(?=\S)")
# What follows a request to keep something: why it is kept ("…, so next time you know"), cut from what is kept.
_KEEP_PURPOSE = re.compile(r"(?i)\?|,?\s+so(?: that)?\s+(?:next time|in (?:the )?future|later|you)\b")
# A request put as a question: "can you save in your memory that …?" asks for it as plainly as "save …".
_POLITE_ASK = _re(r"^(?:(?:ok(?:ay)?|so|and|also|hey|please|pls)[,\s]+)*(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+|also\s+)?(?=\w)")


def _asked_politely(sentence: str, request: re.Match[str]) -> bool:
    """Whether the keep `request` in a question is asked as a request: "can you" right before it."""
    polite = _POLITE_ASK.match(sentence)
    return polite is not None and polite.end() == request.start()


def _to_keep(sentence: str) -> str | None:
    """What a sentence asks to be kept, in its words; "" when it introduces a list of them ("在 CLAUDE.md 中写入几个
    原则："), None when it asks nothing of the kind. A question keeps nothing ("why did you save it in memory?"),
    unless it is a request put politely ("can you save in your memory that …?")."""
    cjk = has_cjk(sentence)
    match = (_KEEP_IT_CJK if cjk else _KEEP_IT).search(sentence)
    if match is None:
        return None
    polite = False
    if is_question(sentence):
        polite = not cjk and _asked_politely(sentence, match)
        # What it keeps must be said in it ("… that we deploy with compose?"); one that names it for
        # Claude to fill in ("can you save in your memory where the docker folder is?") is `_named_to_keep`'s.
        if not polite or not _KEPT_OPENS.match(sentence[match.end():]):
            return None
        sentence = _KEEP_PURPOSE.split(sentence)[0]
    if sentence.rstrip().endswith((":", "：")):
        return ""
    if cjk:
        return clean_sentence(sentence)
    # The side of the request that holds the instruction: "save in memory not write docs unless asked",
    # "never execute git, save in your memory please", "… and save memory we are on odoo18, now is list".
    after = sentence[match.end():] if polite else re.split(r"[,;]", sentence[match.end():], maxsplit=1)[0]
    after = _KEPT_OPENS.sub("", after).strip(" .,;:-")
    before = re.split(r"[,;]|\band\s*$", sentence[: match.start()].rstrip(" ,;-"))[-1].strip(" .,;:-")
    before = re.sub(r"(?i)\s*\b(?:and|also|so|please)\s*$", "", before).strip()
    said = after if len(after.split()) >= 3 else before
    if said is after and before and _POINTS_BACK.match(after):
        # "move the module to X:\Addons, and save in memory this is the path for modules": what "this"
        # names was said before the request, and the rule is nothing without it.
        said = f"{before}, {after}"
    return clean_sentence(said) if len(said.split()) >= 3 else None


# What kept alone would name nothing: "this is the path …", "that's how …", "it goes …", "here …".
_POINTS_BACK = _re(r"^(?:this|that|these|those|it|here|there)(?:'s|\s)")


def _named_to_keep(sentence: str) -> Statement | None:
    """A polite request to keep what Claude knows of a thing it names ("can you save in teh momory the location
    of the custom_addons, docker and docs folders …?"): the user's own request, said once. It asks for memory
    as plainly as "save …", but what is to be kept is Claude's to fill in, so the briefing can only show the ask."""
    if has_cjk(sentence) or not is_question(sentence):
        return None
    match = _KEEP_IT.search(sentence)
    if match is None or not _asked_politely(sentence, match) or _KEPT_OPENS.match(sentence[match.end():]):
        return None
    asked = _KEEP_PURPOSE.split(sentence)[0]  # the request keeps "can you …", the purpose is cut
    named = asked[match.end():].strip(" .,;:-")
    # Read as "keep it <named>" would be: what names the matter at hand ("this", "that one") names nothing to show.
    if len(named.split()) < 3 or _ABOUT_THIS.match(f"keep it {named}"):
        return None
    return Statement("rule", clean_sentence(asked), HEDGED)


_NUMBERED = re.compile(r"^\s*\d+\s*[.、)）]\s*")


def _kept(text: str) -> Statement:
    """What the user asked to keep: plain, for they said it is to last."""
    kind = "decision" if re.match(r"(?i)(?:we|our|the project|this project)\b", text) else "rule"
    return Statement(kind, text, PLAIN, replaced_terms(text))


def is_question(sentence: str) -> bool:
    """A question, with or without its question mark ("how do i deploy it", "…你才会操作吗")."""
    return _asks(sentence) or (has_cjk(sentence) and bool(_CJK_ASKS.search(sentence)))


_PIECE_BREAK = re.compile(r"(?<=[.!?;])\s+")  # a new sentence, even one the user did not capitalise
# Where an instruction may start inside a sentence: "update the docs and i also want you to …".
# A clause after "and"/"but" without its own subject shares the sentence's ("I can track …, but always
# return"), so it opens an instruction only with a subject or an instruction's own words.
_CLAUSE_START = _re(r"(?:,\s*|\s+)(?:and|but|so|also|then|plus)\s+(?=(?:i|we|you|also|please|make sure|be sure|ensure (?:to|that))\b)"
                    # what a fact implies for the work: "X is mutable so only run those on a copy"
                    r"|(?:,\s*|\s+)so\s+(?=(?:always|never|only)\s+[a-z])"
                    r"|,\s+(?=(?:please\s+)?(?:make sure|be sure|ensure (?:to|that)|from now on|going forward|re(?:m|mm)e?m?e?b+e?r)\b)")  # fmt: skip


def _statement(sentence: str) -> Statement | None:
    """The instruction a sentence gives, if any: said by the whole sentence, by one of the sentences
    it runs together ("… as planned. just use X"), or by a clause inside it ("… and i want you to …")."""
    if is_fragment(sentence):
        return None
    text = clean_sentence(sentence)
    if len(text) < 6:
        return None
    if has_cjk(text):
        sentence = _without_leading_questions(sentence)
        if not sentence or _asks(sentence) or _CJK_ASKS.search(sentence) or _OF_SOMEONE_ELSE.search(sentence):
            return None
        if ONE_OFF.search(sentence) and not _UNTIL_CHANGED.search(sentence):
            return None
        return _cjk_statement(sentence, clean_sentence(sentence))
    language = language_of(text)
    if language is not None:
        return _cued_statement(clean_sentence(sentence), language)
    pieces = [p for p in _PIECE_BREAK.split(sentence.strip()) if p.strip()]
    for piece in pieces:
        if ONE_OFF.search(piece) and not _UNTIL_CHANGED.search(piece):
            continue
        # A piece that opens like a question without asking one ("When I upload the file I get this, remember
        # we are on Laravel") may still lay down something in a clause of its own; one with "?" asks.
        asks = _asks(piece)
        if asks and piece.rstrip().endswith(("?", "？")):
            continue
        for clause in _clauses(piece):
            if asks and clause is piece:
                continue
            before = piece[: len(piece) - len(clause)]
            if clause is not piece and _DELIBERATES.search(before):
                continue  # "I'm trying to think … but the big idea is …, we must always …": a design still in talk
            found = _english_form(clean_sentence(clause))
            if found is None:
                continue
            kind, confidence = found
            if confidence < PLAIN and _MAKE_SURE.match(_LEAD_IN.sub("", clause.strip())) and _FIX_AT_HAND.search(before):
                continue  # "the arrow looks odd, please fix it and be sure to be behind the cards": of that fix
            if HEDGE.search(piece):
                confidence = min(confidence, HEDGED)
            # The whole sentence when it is short (what the user said around it is the context);
            # of a long one, the piece that says it, or the clause when the piece is long too.
            said = text if len(sentence) <= MAX_STATEMENT_CHARS else clean_sentence(piece)
            if len(piece) > MAX_STATEMENT_CHARS and clause is not piece:
                said = clean_sentence(clause)
            return Statement(kind, said, confidence, replaced_terms(piece))
    return None


# A fix asked for, or a problem the user sees now: a "make sure …" after it in the sentence is about that fix.
_FIX_AT_HAND = _re(r"\b(?:fix(?:ed|es|ing)?|issue|bug|odd|wrong|broken|still)\b")
# The user thinking aloud: what a clause after this says is a design under discussion, not yet an instruction.
_DELIBERATES = _re(r"\b(?:trying to (?:think|figure|work out)|i'?m (?:thinking|wondering|not sure)|i wonder|"
                   r"(?:the )?(?:big |main |rough )?idea is)\b")  # fmt: skip


def _clauses(piece: str) -> list[str]:
    """The piece, then each clause an instruction may open inside it."""
    return [piece] + [piece[m.end():] for m in _CLAUSE_START.finditer(piece)]


# Words no finished sentence ends on. A preposition can end one ("from now on", "what it is for",
# "when told to"), so none is here.
_CUT_END = _re(r"\b(?:the|a|an|of|and|or|but|which|because|if|your|our|my)\s*$")


def is_fragment(sentence: str) -> bool:
    """A heading, a clause that ends in ":" (it introduces what follows), or a sentence cut off."""
    stripped = sentence.strip().replace("**", "").replace("__", "").strip()
    if not stripped or stripped.startswith("#"):
        return True
    if stripped.endswith((":", "：", "…", "...", ",", "-", "(", "—")):
        return True
    return not has_cjk(stripped) and bool(_CUT_END.search(stripped.rstrip(".!?;")))


def _untypo(text: str) -> str:
    """The scope words a person mistyped by one letter, as they meant them (for `_SCOPE` only)."""

    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        lowered = word.lower()
        if len(lowered) < 4 or lowered in _NOT_TYPOS:
            return word
        return next((meant for meant in _SCOPE_WORDS if lowered[0] == meant[0] and _one_off(lowered, meant)), word)

    return re.sub(r"[A-Za-z]+", fix, text)


def _remember_untyped(core: str) -> str:
    """"rememeber we are on Laravel" as meant: the word that asks to keep something, typed fast."""
    first, space, rest = core.partition(" ")
    lowered = first.lower()
    if lowered != "remember" and lowered.startswith("re") and _one_off(lowered, "remember"):
        return f"remember{space}{rest}"
    return core


def _one_off(word: str, meant: str) -> bool:
    """One letter changed, dropped, added or two swapped."""
    if word == meant or abs(len(word) - len(meant)) > 1:
        return False
    if len(word) == len(meant):
        diff = [i for i, (a, b) in enumerate(zip(word, meant)) if a != b]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and word[diff[0]] == meant[diff[1]]
                                  and word[diff[1]] == meant[diff[0]])  # fmt: skip
    short, long = sorted((word, meant), key=len)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _lasting(core: str, scope: re.Pattern[str] = _SCOPE) -> bool:
    return bool(scope.search(core) or scope.search(_untypo(core)))


def _asks(sentence: str) -> bool:
    """A question. "When you commit, run the linter" opens like one ("when …") but lays down a rule."""
    if not QUESTION.search(sentence):
        return False
    stripped = sentence.strip()
    if stripped.endswith(("?", "？")):
        return True
    opened = _LEAD_IN.sub("", stripped)
    if _WHAT_I_NEED.match(opened):  # "what I need is …, not …" opens like a question and asks nothing
        return False
    core = _LASTING_FRAME.sub("", opened, count=1).strip()
    return core == opened or not (_looks_imperative(core) or _I_WANT.match(core) or _YOU_MUST.match(core))


# Words that say how strongly, not what ("dont fkn give me any plans"): read past them.
_INTENSIFIER = _re(r"\b(?:fucking|fuckin|fkn|fking|fcking|freaking|frickin|friggin|bloody|goddamn)\s+")


def _english_form(text: str) -> tuple[str, float] | None:
    """(kind, confidence) when the sentence is said as a lasting instruction, else None."""
    core = _remember_untyped(_LEAD_IN.sub("", _INTENSIFIER.sub("", text)).strip())
    if len(core.split()) < 3 or _PICKS_AN_OPTION.search(core):
        return None
    if _CONDITION.match(core):  # "If you add a migration, always run …": the main clause decides
        head, comma, rest = core.partition(",")
        if not comma:
            return None
        core = rest.strip()
    framed = bool(_UNTIL_CHANGED.search(core))
    if framed:  # "for now … until told otherwise" holds until changed: "for now" is not a one-off here
        core = re.sub(r"(?i)^for now\b[,\s]*", "", core)
    framed_core = _LASTING_FRAME.sub("", core, count=1).strip()
    framed = framed or framed_core != core
    core = _LEAD_IN.sub("", framed_core).strip()
    if len(core.split()) < 2 or _NARRATIVE.search(core):
        return None
    task_bound = bool(_TASK_BOUND.search(core)) and not _UNTIL_CHANGED.search(core)
    if _DECISION_LABEL.match(core):
        return ("decision", PLAIN) if not task_bound else None
    if _PREFER.match(core):
        return ("preference", PLAIN) if not task_bound else None
    if _ALWAYS_NEVER.match(core) or _MODAL_WE_YOU.match(core) or _WANT_YOU.match(core):
        return "rule", PLAIN
    if _USE_X_NOT_Y.match(core):
        return ("decision", PLAIN) if not task_bound else None
    if _THING_MUST.match(core):
        return "rule", USUAL
    if _BELONGS_IN.match(core) and not task_bound:
        return "decision", USUAL
    if task_bound:
        return None
    if _PROHIBITION.match(core):  # "don't revert anything" is about the task at hand; "don't ever …" lasts
        if framed or _re(r"\b(?:ever|again|anymore|any more)\b").search(core):
            return "rule", PLAIN
        if _lasting(core) or _NO_KIND_OF.match(core):
            return "rule", HEDGED
        return None
    if _STOP_DOING.match(core):
        return "rule", PLAIN if framed else USUAL
    if _WE_WILL_USE.match(core) and not _WORK_STEP.search(core):
        return "decision", PLAIN if framed else USUAL
    if _LETS_HAVE.match(core) and not _WORK_STEP.search(core):
        return "decision", HEDGED
    if _WE_CONVENTION.match(core):
        return "decision", USUAL
    if _I_USE.match(core) and not _REPORTS_A_PROBLEM.search(core):
        return "preference", USUAL
    if _MAKE_SURE.match(core):
        if framed or _WHEN_WORDS.search(core):
            return "rule", PLAIN
        # "make sure siyuan is up to date" checks something now; "make sure that handoff updates siyuan"
        # and "be sure to also use serena" ask for a way of working.
        return None if _CHECKS_A_STATE.match(core) and not _lasting(core) else ("rule", HEDGED)
    if framed and (_looks_imperative(core) or _I_WANT.match(core)):
        return "rule", PLAIN
    return _said_once_form(core)


# Design decisions said in the first person, each usually but not always one that holds: "I like the
# names X, Y and Z for the three steps", "I still want to use the existing X functions", "I'm leaning
# towards a sync-type parameter". Not "I like option 2" (an option pick, refused before this).
_I_LIKE_NAMES = _re(r"^i\s+(?:really\s+)?(?:like|prefer|want)\s+(?:the\s+)?(?:names?|naming|terms?)\b.{3,}\bfor\b")
_I_KEEP_USING = _re(r"^i\s+(?:still|also|really)\s+(?:want|'d like|would like|prefer)\s+to\s+(?:keep\s+)?(?:use|using|reuse|reusing|stick with)\s+\S")
# "I want to leave get_totals mostly as is and …": what stays as it is, decided.
_LEAVE_AS_IS = _re(r"^i\s+(?:still\s+)?(?:want|'d like|would like)\s+to\s+(?:leave|keep)\s+(?!(?:it|this|that|them|these|those)\b)\S+.{0,40}?\bas (?:is|it is)\b")
# A restriction said as what a fact implies ("… so only run those on a copy"): only after "so" (see _CLAUSE_START);
# "only change the tests" alone scopes the task at hand.
_ONLY_DO = _re(r"^only\s+(?:run|call|use|edit|change|modify|touch|write|mutate|apply|do)\b(?=.*\b(?:on|in|with|through|via)\b)")
_LEANING = _re(r"^(?:i'?m|i am|we'?re|we are)\s+leaning\s+(?:towards?|to)\s+\S")
# An order of work: "help me think through it before you suggest changes".
_BEFORE_YOU = _re(r"\bbefore\s+(?:you|we)\s+(?:suggest|make|propose|write|implement|start|change|edit|touch|code)\w*\b")
_ASKS_FOR = _re(r"^(?:help|talk|think|discuss|explain|walk|check|ask|show|tell|plan|outline)\b")


# A design requirement on a named thing: "out of stock should be a filter option", "the `lib/hosts` directory
# should only hold machine-level definitions". Not a pronoun's ("it should work now"), nor what the
# user expects to see happen ("the tests should pass", "the page should load fine now").
# (A guess, "maybe phones should be …", is refused beside it: _GUESSED.)
_THING_SHOULD = _re(rf"^(?!(?:{_NOT_A_NAMED_THING}|u|everything|nothing|all|both|either|neither|in|on|at|for|to|from|with|by)\b)"
                    r"(?:(?:the|our|all|every|each|any|my)\s+)?[\w`'\".-]+(?:\s+[\w`'\"./-]+){0,4}?\s+"
                    r"should\s+(?:only\s+|not\s+|also\s+|always\s+|never\s+|just\s+)?"
                    r"(?!(?:be\s+)?(?:fixed|working|fine|ok|okay|good|done|able|there|here|now|back|ready|gone|visible|correct|"
                    r"right|enough|possible|updated|resolved|solved|installed|available)\b)"
                    r"(?!(?:work|pass|load|run|build|compile|succeed|fail|happen|appear|show|see|get|be\s+(?:in|on|at|from))\b)"
                    r"(?!have\s+(?:been|\w+ed|\w+en)\b)\w+")  # fmt: skip
# An opinion said before it: "I feel as though …", "I think that …" (what follows is the user's view).
_OPINION_LEAD = _re(r"^i\s+(?:really\s+)?(?:feel|think|believe)(?:\s+(?:as though|as if|like|that))?\s+")
# A guess about the thing, not a requirement on it. Not cues.HEDGE: that refuses "I think …" too,
# which before a requirement leads in the user's own view.
_GUESSED = _re(r"\b(?:maybe|perhaps|probably|might|possibly)\b")
# What the user wants of a named thing: "I need the container to reflect my setup".
_WANT_THING_TO = _re(r"^i\s+(?:also\s+|really\s+)?(?:need|want|would like|'d like|expect)\s+(?:the|my|our|all|every|each)\s+"
                     r"[\w`'\"./-]+(?:\s+[\w`'\"./-]+){0,4}?\s+to\s+(?!(?:pass|work|load|run|build|compile|succeed|show up|be fixed|be working)\b)\w+")  # fmt: skip

# What the user settles for the team: "we should move the expiry logic into the storage layer", "we should
# not have side effects there". Often a design that holds, sometimes only the next move: said once.
_WE_SHOULD = _re(r"^we\s+(?:should|must)\s+(?:also\s+|not\s+|still\s+|just\s+|only\s+)?"
                 r"(?!(?:be\s+)?(?:fine|ok|okay|good|done|able|ready|there|here|back)\b)\w+")  # fmt: skip
# What is done about the work at hand, not how it is to be: "we should fix the login bug first", "I will use
# the debugger to find it". Such a sentence plans the next move.
_NEXT_MOVE = _re(r"\b(?:fix|try|check|look|test|debug|investigate|see|find|start|begin|continue|finish|wait|rerun|retry|"
                 r"restart|revert|commit|push|merge|figure|review|focus|tackle|handle|proceed|discuss|talk|think)\b|"
                 r"\b(?:first|next|now|then|later|asap|again)\s*[.!]?$")  # fmt: skip

# A want given with its reason is a design choice: "I want it to be a flake, for the sake of injecting the
# dotfiles repo". Without one, "I want it to …" is mostly the task at hand ("I want it to show the total").
_WANT_IT_FOR = _re(r"^i\s+(?:also\s+|really\s+)?(?:want|need|would like|'d like|would also like)\s+(?:it|this|that|them|these|those)\s+"
                   r"to\s+\w+.*\b(?:for the sake of|so that|so (?:i|we) can|because|in order to)\b")  # fmt: skip

# What the user needs instead of what they got: "what I need is a plan I can act on, not a list of problems".
_WHAT_I_NEED = _re(r"^what i (?:really )?(?:need|want) is\b.{1,80}?,?\s*(?:and |but )?not\b")
# How the user says they will work: "I will use codespace to work from phone or friend pc".
_I_WILL_USE = _re(r"^i\s*(?:'ll|will|am going to|'m going to|plan to)\s+(?:use|work (?:from|with|on|in))\s+(?!(?:it|this|that|them)\b)\S")


# The project's setup as the user states it: "we are using yarn", "we're using shadcn so please use …",
# "we already have a dev server running". Told to keep Claude from doing otherwise; said once, since
# a setup can change.
_WE_ARE_USING = _re(r"^(?:we(?:'re| are|re)\s+(?:already\s+|now\s+|currently\s+|still\s+)?|(?:i'?m\s+|i am\s+)?currently\s+)using\s+"
                    r"(?!(?:it|this|that|them|these|those|the same|too|to|so|much|many|a lot|lots|up|more|less|an? old)\b)[\w@.`/-]+")
_WE_ALREADY_HAVE = _re(r"^we\s+already\s+have\s+(?:a|an|the|our)\s+(?:[\w.-]+\s+){1,4}?(?:running|set up|installed|configured)\b")


def _said_once_form(core: str) -> tuple[str, float] | None:
    """The forms a lasting instruction takes without "always" or "never", each usually but not always
    one: said once, they are briefed marked as such (HEDGED) until confirmed."""
    if _I_LIKE_NAMES.match(core) or _LEANING.match(core):
        return "decision", HEDGED
    if (_WE_ARE_USING.match(core) or _WE_ALREADY_HAVE.match(core)) and not _REPORTS_A_PROBLEM.search(core):
        return "decision", HEDGED
    if _I_KEEP_USING.match(core) and not _ABOUT_THIS.search(core):
        return "preference", HEDGED
    if _LEAVE_AS_IS.match(core):
        return "decision", HEDGED
    if (_I_WILL_USE.match(core) and not (_REPORTS_A_PROBLEM.search(core) or _NEXT_MOVE.search(core))) or _WHAT_I_NEED.match(core):
        return "preference", HEDGED
    if _ONLY_DO.match(core) and not _TASK_BOUND.search(core):
        return "rule", HEDGED
    if _BEFORE_YOU.search(core) and (_looks_imperative(core) or _ASKS_FOR.match(core)):
        return "rule", HEDGED
    if _lasting(core) and (_looks_imperative(core) or _WANT_YOU_TO.match(core) or _MODAL.match(core)):
        return "rule", HEDGED
    if _lasting(core, _KEPT_UP) and (_WANT_YOU_TO.match(core) or _MODAL.match(core) or _IT_SHOULD_LAST.match(core)):
        return "rule", HEDGED
    if _MAY.match(core) and _MAY_SCOPE.search(core) and not _ABOUT_THIS.search(core):
        return "preference", HEDGED
    if _THING_MUST_DO.match(core):
        return "rule", HEDGED
    if _WANT_TO_HAVE.match(core):
        return "decision", HEDGED
    if _RUNS_FROM.match(core) or (_WANT_IT_FOR.match(core) and not (_GUESSED.search(core) or _NEXT_MOVE.search(core))):
        return "decision", HEDGED
    opinion = _OPINION_LEAD.sub("", core, count=1)
    we_settle = _WE_SHOULD.match(opinion) and not _NEXT_MOVE.search(opinion)
    if (_THING_SHOULD.match(opinion) or we_settle or _WANT_THING_TO.match(core)) and not (_TASK_BOUND.search(core) or _GUESSED.search(core)):
        return "decision", HEDGED
    return None


_IMPERATIVE = _re(r"^(?:use|run|add|write|keep|put|make|avoid|follow|commit|push|test|check|name|format|lint|document|"
                  r"update|call|import|store|log|return|raise|handle|ask|tell|answer|reply|respond|explain|comment|"
                  r"create|remove|delete|leave|include|exclude|wrap|split|place|stick|treat|mark|tag|bump|build|"
                  r"deploy|release|install|pin|lock|review|squash|rebase|merge|open|read|print|show|report|speak|"
                  r"talk|be|give|prefix|suffix|sort|group|type|annotate|validate|verify|start|end|target|support|"
                  r"default|send|save|skip|ignore|mention|cite|link|prefer|reference|do)\b")  # fmt: skip


def _looks_imperative(core: str) -> bool:
    return bool(_IMPERATIVE.match(core))


# A Chinese question needs no question mark: a particle at the end of a clause ("…你才会操作吗，还是…"),
# "whether", or a question word.
# Not "whatever" (不管什么, 无论怎么, 什么都): a question word that asks nothing.
_CJK_ASKS = re.compile(r"[吗嘛呢][\s，,。！!]*$|[吗嘛][，,]|是否|为什么|为啥|如何|能不能|可不可以|是不是|有没有|要不要|会不会|"
                       r"对不对|行不行|好不好|(?<!不管)(?<!无论)(?<!或多或少)(?:怎么|什么|哪[个些里儿种]|多少)(?![都也])|"
                       # "A or B?" without its mark: "这个是我自己决定还是让客户选择"
                       r"是[^，,。；]{0,20}还是")  # fmt: skip
# Words about a third person ("他的深层需求…", "用户现在问我…", "我应该给出…"): another model's reasoning or
# a story the user pasted, not what they ask of the assistant.
_OF_SOMEONE_ELSE = re.compile(r"(?:^|[，,。；：:]|既然|因为|而且|所以|但是?|接着|然后|如果|虽然|考虑到)\s*[他她](?![们人])|"
                              r"用户(?:现在|刚才|问|说|想|希望|提到)|我应该")  # fmt: skip
_CJK_CLAUSE = re.compile(r"(?<=[，,])")


def _without_leading_questions(sentence: str) -> str:
    """The sentence without the questions it opens with ("那可以帮我清理c盘吗，但是…都要给我决策"): what
    follows them may still lay down a rule."""
    clauses = _CJK_CLAUSE.split(sentence)
    asked = False
    # a clause that goes on a question asks too ("有没有办法让…，并且每次都…"); nothing left: all asked
    while clauses and (_CJK_ASKS.search(clauses[0].rstrip("，, ")) or asked and _GOES_ON.match(clauses[0])):
        asked, clauses = True, clauses[1:]
    return "".join(clauses).strip()


# A clause that goes on with the one before it ("…，并且…", "…，而且…"): part of what that one says or asks.
_GOES_ON = re.compile(r"^\s*(?:并且|而且|并|以及|同时|还有)")


def _cjk_statement(sentence: str, text: str) -> Statement | None:
    """A CJK sentence's instruction, by its cue words; a Chinese one's, where they stand (below)."""
    chinese = is_chinese(sentence)
    rule = _chinese_rule(sentence) if chinese else ("plain" if CJK_RULE.search(sentence) else None)
    if CJK_PREFERENCE.search(sentence):
        kind = "preference"
    elif CJK_DECISION.search(sentence) and (not chinese or _chinese_decision(sentence, rule)):
        kind = "decision"
    elif rule is not None:
        kind = "rule"
    elif CJK_WANTS_ONCE.search(sentence):  # only when nothing says it plainly ("我需要你全部改用 pnpm" decides)
        return Statement("preference", text, HEDGED, replaced_terms(sentence))
    else:
        return None
    if rule is not None and kind == "decision" and not replaced_terms(sentence):
        kind = "rule"  # "以后统一用 X" is an instruction first
    if HEDGE.search(sentence):
        confidence = HEDGED
    elif kind == "rule":
        confidence = PLAIN if rule == "plain" else HEDGED
    elif kind == "preference" or rule == "plain" or re.match(r"(决定|決定|결정)", text):
        confidence = PLAIN
    else:
        confidence = USUAL  # a decision said in passing
    return Statement(kind, text, confidence, replaced_terms(sentence))


# --- Chinese: a cue word says an instruction only where it governs what is to be done ------------------
#
# Found anywhere in a sentence, the cue words match descriptions, narration and other words:
# "我感觉有些拿捏不准" (unsure: 不准 is "not accurate"), "进度档案未禁止回退" (not forbidden),
# "meta.transit_days 始终 null" (a value, always null), "以后真的就可以变成思考伙伴了" and
# "现在没有不代表以后没有" (what may come later), "如果 sender 数据不准，S1 会误判" (a condition),
# "这个文件帮我转换成…" (a task: 换成 inside 转换成). So each cue is read where it stands:
# a time to come (以后, 每次, 始终) must be followed by what is to be done (你…, 要…, 都…, 不要…),
# not by what can or will happen; a prohibition must be one, not part of another word; an
# obligation without a time to come ("必须要我参与") is said once; a condition says nothing.
_ZH_CONDITION = re.compile(r"^\W*(?:\d+\s*[.、)）]\s*)?(?:如果|假如|要是|若是?|万一|假设|一旦|只要)")
_ZH_FROM_NOW = re.compile(r"(?<![可所])以后(?!我|会|可|能够)|今后|从现在起|从今以后|往后|始终|总是|一律|每次|每一次|永远")
# What is to be done, said after a time to come: "以后…你需要…", "每次…都…", "以后统一用…"; the weak
# ones (用, 先) say it only before anything says what can or will happen ("以后可以用 X" narrates).
_ZH_DIRECTS = re.compile(r"你|您|请|要|必须|务必|需要|得先|应该|应当|一律|统一|记得|不要|别|不许|禁止|都")
_ZH_WEAK_DIRECTS = re.compile(r"(?:先|用|使用|保持|按)(?![不没])")
_ZH_NARRATES = re.compile(r"可以|能够?|会|真的|没有|也许|可能|是")
_ZH_REASON = re.compile(r"^\s*(?:因为|由于|既然|毕竟)")
_ZH_BAN = re.compile(r"不要再|别再|不要|不许|(?<![捏说看测估算据得])不准(?!确)|(?<![未没无不])禁止|千万别|永远不要|(?:^|[，,；;\s]|你|也|就|都|请)别(?=[\u4e00-\u9fff])")
_ZH_NOT_A_BAN = re.compile(r"要不要|不要紧|不要钱")
# A prohibition with no end: "never again", "absolutely never", "not allowed".
_ZH_NEVER = re.compile(r"不要再|别再|再也不要|永远不要|绝对不要|绝不|决不|千万不要|千万别|不许|禁止")
_ZH_MUST = re.compile(r"(?<![不未无没])(?:必须|务必)")
# A whole kind of case: "所有删除都要先问我", "任何时候都不要…", "我需要你…凡是…都要…", "由我决定".
_ZH_EVERY_CASE = re.compile(
    r"(?<!把)(?:所有|任何|凡是|一切|全部)[^，,。；]{0,20}都(?:要|得|必须|不|别|先)"
    r"|我(?:需要|希望|要)你(?!把)[^。；]{0,30}?(?:针对|凡是|所有|任何|每次|遇到|涉及)[^。；]{0,30}?(?:要|都|必须|先)"
    r"|(?:给我|由我|让我|我来|我做)[^，,。；]{0,4}决策|由我(?:来)?决定"
    r"|(?:下次|下一次|今后|每当|将来)[^。；]{0,20}?(?:不能|不可以|不要|别|必须|要先)"
    # before, after or while an act that recurs: "部署前必须通知运维", "提交之前都要先跑测试"
    r"|(?<![我你他她们久早刚])(?:之前|以前|之后|的时候|(?<![之以])前)[，,]?\s*(?:都|一定|必须|务必|要先|不要|别)"
)
# A task asked of the assistant ("帮我转换成 word"): a choice inside it is for that task.
_ZH_TASK = re.compile(r"帮我|麻烦你|给我(?!决策)")
# Told as done ("原对话是采用了…", "已经换成了…"), a switch is the story of a choice, not one made.
_ZH_SWITCHES = re.compile(r"(?:决定|(?<![能才没再未])定下来|就用|改用|(?<![转替变])换成|统一用|采用|而不是|不再用|(?<!我用)(?:代替|取代))(?!了)")


def _chinese_rule(sentence: str) -> str | None:
    """Whether a Chinese sentence lays down a rule: "plain" (a time to come or a whole kind of case
    governs what is to be done), "once" (a prohibition or an obligation of the matter at hand:
    briefed as said once), None."""
    if _ZH_CONDITION.search(sentence):
        return None
    if _ZH_EVERY_CASE.search(sentence):
        return "plain"
    for cue in _ZH_FROM_NOW.finditer(sentence):
        if _ZH_REASON.match(re.split(r"[，,；;]", sentence[: cue.start()])[-1]):
            continue  # "因为每次输出…": a reason given, not a time to come
        # what is to be done is said in the cue's clause or the next ("每次下载软件，都…"), not anywhere later
        after = "".join(_CJK_CLAUSE.split(sentence[cue.end():])[:2])
        weak, narrates = _ZH_WEAK_DIRECTS.search(after), _ZH_NARRATES.search(after)
        if _ZH_DIRECTS.search(after) or (weak and (narrates is None or weak.start() < narrates.start())):
            return "plain"
    sentence = _ZH_NOT_A_BAN.sub("", sentence)
    if _ZH_BAN.search(sentence) or _ZH_MUST.search(sentence):
        return "plain" if _ZH_NEVER.search(sentence) else "once"
    return None


def _chinese_decision(sentence: str, rule: str | None) -> bool:
    """Whether a Chinese sentence announces a choice that lasts: a switch word that is one (not 换成
    inside 转换成, "convert to"), outside a task asked of the assistant unless a time to come governs it."""
    if _ZH_CONDITION.search(sentence) or not _ZH_SWITCHES.search(sentence):
        return False
    return rule == "plain" or not _ZH_TASK.search(sentence)


def _cued_statement(text: str, language: Language) -> Statement | None:
    """A French, Spanish or German sentence's instruction, by its language's cue words (memory/cue_languages.py)."""
    found = cued_instruction(text, language)
    if found is None:
        return None
    said = text if len(text) <= MAX_STATEMENT_CHARS else clean_sentence(found.clause)
    return Statement(found.kind, said, PLAIN if found.plain else HEDGED, replaced_terms(text))


def _unique(items: list[Statement]) -> list[Statement]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = " ".join(item.text.lower().split())
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


# --- bans said again -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Ban:
    """A prohibition in the user's words that is not an instruction by itself ("commit all, do not add
    your signature" may be about this commit): said again in another session, it is one."""

    text: str  # the clause from its "do not" on, as the user wrote it
    verb: str
    objects: frozenset[str]  # the words naming what is banned: how a repeat in other words is known

    def same_as(self, other: "Ban") -> bool:
        shared = self.objects & other.objects
        return self.verb == other.verb and len(shared) * 2 >= min(len(self.objects), len(other.objects)) and bool(shared)


_BAN_CLAUSE = _re(r"^(?:(?:and|but|so|also|then|ok(?:ay)?|please|pls)\s+)*((?:do not|don'?t|never)\s+(?:ever\s+)?([a-z]+)\s+(\S.*))$")
_BAN_SPLIT = _re(r"[,;:]\s*|\s+(?:and|but|so|then)\s+(?=(?:please\s+)?(?:do not|don'?t|never)\b)")
# Verbs of a feeling or a thought, not of work: "don't worry about the tests", "don't think so".
_NOT_WORK = frozenset("worry know think mind see understand realize care bother get need have want feel hesitate".split())
MAX_BAN_WORDS = 12
# Words that name nothing banned: "do not add your signature" bans a signature, whatever is around it.
_NOT_NAMES = frozenset("the a an your my our their his her its this that these those any some it them anything something "
                       "everything nothing all please file files thing things stuff one ones here there now again to of "
                       "in on for with from at by into about without unless until when anymore more".split())  # fmt: skip
_OBJECT_WORD = re.compile(r"[\w.@/-]*\w")


def bans(prompt: str) -> list[Ban]:
    """The prohibitions in the user's own words, clause by clause, with or without a lasting scope: a bare
    one ("commit all, do not add your signature") is no instruction by itself (`standing_statements`
    leaves it), but becomes one when another session says the same (memory/extraction.py)."""
    found: list[Ban] = []
    for paragraph in own_words(prompt):
        for sentence in sentences(paragraph):
            if is_question(sentence) or is_fragment(sentence):
                continue
            for clause in _BAN_SPLIT.split(sentence):
                match = _BAN_CLAUSE.match(clause.strip())
                if (match is None or _TASK_BOUND.search(clause) or match.group(2).lower() in _NOT_WORK
                        or len(clause.split()) > MAX_BAN_WORDS):  # a long clause tells, it does not ban
                    continue
                objects = frozenset(w.lower().strip(".") for w in _OBJECT_WORD.findall(match.group(3)))
                objects = frozenset(w for w in objects if len(w) > 2 and w not in _NOT_NAMES)
                if objects:  # the ban from its "do not" on: "please do not add …" and "do not add …" are one
                    found.append(Ban(clean_sentence(match.group(1)), match.group(2).lower(), objects))
    return found
