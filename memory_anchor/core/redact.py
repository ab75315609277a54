"""Scrubbing captured data before it is stored or sent anywhere.

Three steps, always in this order (`sanitize` runs them all):

1. `strip_private`: `<private>…</private>` spans are the user's way of saying
   "never remember this"; they are dropped entirely (an unclosed tag drops to the
   end, erring on the side of privacy).
2. `redact`: secrets are replaced by `[REDACTED:<kind>]`. Provider keys are
   recognised by their prefixes; credentials in config and env assignments,
   URLs and headers by their context; dict values by their key name. One scan
   for all the rules' needles and keywords first lets most strings skip them.
3. `truncate`: oversized strings keep their head and tail around a
   `…[truncated N chars]…` marker, so a 5 MB tool output is stored, cut down;
   long lists keep their first items.

Redaction runs before truncation so that a cut can never leave half a secret
behind a marker. Every function accepts JSON-like values of any shape and
returns a new value; inputs are never modified in place. The marker text never
matches a pattern, so redacting twice is the same as redacting once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

MARKER_PREFIX = "[REDACTED:"


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


# --- <private> spans ----------------------------------------------------------

_PRIVATE_SPAN = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)


def strip_private(text: str) -> str:
    """Drop every `<private>…</private>` span (an unclosed one runs to the end)."""
    if "<" not in text:
        return text
    return _PRIVATE_SPAN.sub("", text)


# --- secrets in text ------------------------------------------------------------

# Context rules match from the secret word onwards (what precedes it is kept as
# is anyway) and bound every quantifier, so a multi-megabyte output costs linear
# time, not quadratic backtracking.
_SECRET_WORDS = r"(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)"
_ENV_SECRET_WORDS = (
    r"(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|"
    r"SIGNING_?KEY|ENCRYPTION_?KEY|MASTER_?KEY|CREDENTIALS?|MYSQL_PWD)"
)
# Words after which prose gives a password: "the admin password is …", "pw: …".
_PROSE_PASSWORD_WORDS = r"(?:passwords?|passwd|passphrase|passcode|pw|pwd)"
# Commands whose `-p<value>` (no space: `mysql -p db` prompts, then opens db) is a password.
_MYSQL_FAMILY = r"(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mariadb(?:-dump|-admin)?)"
# A command-line value: quoted, or up to the next space.
_CLI_VALUE = r"('[^'\n]{1,200}'|\"[^\"\n]{1,200}\"|[^\s'\"]{1,200})"


def _keep_group(group: int, kind: str) -> Callable[[re.Match[str]], str]:
    """A replacement that keeps the text before `group` and redacts the group."""

    def replace(match: re.Match[str]) -> str:
        value = match.group(group)
        if value.startswith(MARKER_PREFIX) or value.strip("\"'").startswith(MARKER_PREFIX):
            return match.group(0)
        start, end = match.span(group)
        whole_start = match.start(0)
        head = match.group(0)[: start - whole_start]
        tail = match.group(0)[end - whole_start :]
        quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
        return f"{head}{quote}{marker(kind)}{quote}{tail}"

    return replace


# The three assignment rules. Each is slow to scan for: a case-insensitive word list, or a run of
# capitals before the word, gives re no first character to skip ahead to, so it tries every
# position of the text. A cheaper pattern that every one of their matches also matches is looked
# for first (`_FIRST_LOOKS`).
_ENV_ASSIGNMENT = re.compile(
    r"((?<![A-Za-z0-9])[A-Z0-9_]{0,30}?" + _ENV_SECRET_WORDS + r"(?:_[A-Z0-9]{1,30}){0,6}\b[\"']?\s*[:=]\s*)"
    r"(\"[^\"\n]+\"|'[^'\n]+'|[^\s\"'`;&|,)}]+)"
)
_QUOTED_ASSIGNMENT = re.compile(r"(?i)(" + _SECRET_WORDS + r"[\"']?\s*[:=]\s*)(\"[^\"\n]{4,}\"|'[^'\n]{4,}')")
_CONFIG_LINE = re.compile(
    r"(?im)(^[ \t]*[\w.-]{0,40}" + _SECRET_WORDS + r"[ \t]*[:=][ \t]*)([^\s\"'#(){}\[\]$<>]{4,})[ \t]*$"
)

# (kind, pattern, replacement) in order: whole blocks first, then provider keys
# (Anthropic before OpenAI: `sk-ant-` would also match the OpenAI shape), then
# context-based rules, which skip values an earlier rule already redacted.
_RULES: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str] | None]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN ((?:[A-Z0-9]+ ){0,4})PRIVATE KEY((?: BLOCK)?)-----.*?"
            r"(?:-----END \1PRIVATE KEY\2-----|\Z)",
            re.DOTALL,
        ),
        None,
    ),
    # The tail of a key whose BEGIN line was cut off (by a tool, or by truncation).
    (
        "private_key",
        re.compile(r"(?:^[A-Za-z0-9+/=]{16,}\r?\n)*-----END (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----", re.M),
        None,
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{4,}"), None),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), None),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"), None),
    (
        "aws_secret_key",
        re.compile(
            r"(?i)(aws[\w.-]{0,30}?(?:secret|sk)[\w.-]{0,30}[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        _keep_group(2, "aws_secret_key"),
    ),
    ("github_token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b"), None),
    ("github_token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"), None),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), None),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), None),
    ("pypi_token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}"), None),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{34,}\b"), None),
    ("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), None),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{10,}"),
        None,
    ),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), None),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"), None),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), None),
    # scheme://user:password@host
    (
        "url_password",
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,20}://[^\s:/@\"'<>\[\]]{1,100}:)([^\s@/\"'<>\[\]]{1,200})(@)"),
        _keep_group(2, "url_password"),
    ),
    # Authorization: Bearer xyz / "authorization": "Basic ..." / -H 'Authorization: token abc'
    (
        "authorization",
        re.compile(
            r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?)"
            r"(?!(?:bearer|basic|token|digest)\b)([A-Za-z0-9._~+/=:$-]{6,})"
        ),
        _keep_group(2, "authorization"),
    ),
    ("bearer_token", re.compile(r"(\bBearer\s+)([A-Za-z0-9._~+/=-]{16,})"), _keep_group(2, "bearer_token")),
    # ?api_key=...&token=...
    (
        "url_secret",
        re.compile(
            r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|sig|signature)=)([^&\s#\"'<>]{4,})"
        ),
        _keep_group(2, "url_secret"),
    ),
    # --password=x, --token x
    (
        "cli_secret",
        re.compile(
            r"(?i)(--(?:[a-z]{1,20}-)?(?:password|passwd|pass|passphrase|token|api-key|apikey|secret|"
            r"client-secret|access-token|auth-token)(?:=|\s+))"
            r"([^\s\"'-][^\s\"']{2,}|\"[^\"\n]+\"|'[^'\n]+')"
        ),
        _keep_group(2, "cli_secret"),
    ),
    # Passwords given to command-line tools: mysql -p'x' / -px, sshpass -p x,
    # docker login -p x, redis-cli -a x, curl -u user:x.
    ("cli_password", re.compile(r"((?<![\w-])-p)('[^'\n]{1,200}'|\"[^\"\n]{1,200}\")"), _keep_group(2, "cli_password")),
    (
        "cli_password",
        re.compile(r"(\b" + _MYSQL_FAMILY + r"\b[^\n|;&]{0,200}?\s-p)([^\s'\"-][^\s'\"]{0,200})"),
        _keep_group(2, "cli_password"),
    ),
    (
        "cli_password",
        re.compile(
            r"(\b(?:sshpass\b[^\n|;&]{0,100}?\s-p|(?:docker|podman|helm|nerdctl)\s+(?:registry\s+)?login\b"
            r"[^\n|;&]{0,200}?\s-p|redis-cli\b[^\n|;&]{0,200}?\s-a)\s*)" + _CLI_VALUE
        ),
        _keep_group(2, "cli_password"),
    ),
    (
        "cli_password",
        re.compile(r"(\b(?:curl|wget)\b[^\n|;&]{0,300}?\s(?:-u|--user)[\s=]*['\"]?[^\s:'\"]{1,100}:)([^\s'\"@]{1,200})"),
        _keep_group(2, "cli_password"),
    ),
    # ENV-style (upper case): DB_PASSWORD=..., export GITHUB_TOKEN="...", AWS_SECRET_ACCESS_KEY: ...
    (
        "secret_assignment",
        _ENV_ASSIGNMENT,
        lambda match: _redact_if(match, _assigned_value_like, "secret_assignment"),
    ),
    # Config/code with a quoted literal: password = "x", "api_key": "x", token: 'x'
    (
        "secret_assignment",
        _QUOTED_ASSIGNMENT,
        lambda match: _redact_if(match, _assigned_value_like, "secret_assignment"),
    ),
    # Config line with a bare value: `password: hunter2`, `db.password=hunter2`;
    # not code (`password = form.get(name)`) nor templates (`token: ${TOKEN}`).
    (
        "secret_assignment",
        _CONFIG_LINE,
        lambda match: _redact_if(match, _assigned_value_like, "secret_assignment"),
    ),
    # Prose: "the admin password is hunter2", "password for root: 'x'", "pw = Tr0ub4dor&3".
    # The value must look like a password (see `_password_like`), so "the password
    # is required" or `password = form.get(name)` stay as they are.
    (
        "prose_password",
        re.compile(
            r"(?i)(\b" + _PROSE_PASSWORD_WORDS + r"\b(?:\s+(?:for|of|to|on)\s+(?:the\s+|my\s+|our\s+|your\s+)?"
            r"[\w@.-]{1,40}(?:\s+(?:account|user|server|database|db|box|host|login))?)?"
            r"[ \t]*(?:\bis\b|\bwas\b|\bset\s+to\b|\bchanged\s+to\b|:|=)[ \t]*)"
            r"('[^'\n]{3,100}'|\"[^\"\n]{3,100}\"|`[^`\n]{3,100}`|[^\s'\"`]{4,100})"
        ),
        lambda match: _redact_if(match, _password_like, "prose_password"),
    ),
    # Prose that puts the value right after the word: "… and password CorrectHorse-Battery7",
    # "set the password to Tr0ub4dor&3". With no "is" or ":" to say a value follows, the
    # value must look more like one (see `_bare_password_like`): "password hashers",
    # "password reset" or "passwd --delete bob" stay as they are.
    (
        "prose_password",
        re.compile(
            r"(?i)(\b" + _PROSE_PASSWORD_WORDS + r"\b(?:[ \t]+(?:to|now|is[ \t]+now))?[ \t]+)"
            r"('[^'\n]{6,100}'|\"[^\"\n]{6,100}\"|`[^`\n]{6,100}`|[^\s'\"`]{5,99}[^\s'\"`.,;:!?)])"
        ),
        lambda match: _redact_if(match, _bare_password_like, "prose_password"),
    ),
    ("prose_password", re.compile(r"((?:密码|口令)\s*(?:是|为|:|：)\s*)([^\s，。、；]{3,100})"), _keep_group(2, "prose_password")),
    # Bare keys, whatever stands around them: a 40-character AWS secret access key,
    # judged by its shape and entropy (see `_random_key_like`).
    (
        "bare_aws_secret",
        re.compile(r"(?<![A-Za-z0-9/+])()([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
        lambda match: _redact_if(match, _random_key_like, "aws_secret_key"),
    ),
]

# What a slow rule's every match contains, and whether it is looked for in the text as it came or
# in its folded form (`_folded`: one character for one, each folded as the rule's IGNORECASE
# compares it, so the lower-case words find every spelling the rule would). Case-sensitive word
# lists let re skip to the words' first letters: 5-10 times faster than the rules on tool output.
_FIRST_LOOKS: dict[re.Pattern[str], tuple[re.Pattern[str], bool]] = {
    _ENV_ASSIGNMENT: (re.compile(_ENV_SECRET_WORDS + r"(?:_[A-Z0-9]{1,30}){0,6}\b[\"']?\s*[:=]"), False),
    _QUOTED_ASSIGNMENT: (re.compile(_SECRET_WORDS + r"[\"']?\s*[:=]\s*[\"']"), True),
    _CONFIG_LINE: (re.compile(_SECRET_WORDS + r"[ \t]*[:=]"), True),
}


def _may_match(pattern: re.Pattern[str], text: str, lowered: str) -> bool:
    first = _FIRST_LOOKS.get(pattern)
    if first is None:
        return True
    look, folded = first
    return look.search(lowered if folded else text) is not None


# Cheap pre-checks: a rule only runs when its needle is in the text. Most tool
# output contains none of them, which keeps redaction fast on large outputs.
_NEEDLES: dict[str, tuple[str, ...]] = {
    "gitlab_token": ("glpat-",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-",),
    "huggingface_token": ("hf_",),
    "private_key": ("PRIVATE KEY",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "aws_access_key": ("AKIA", "ASIA", "ABIA", "ACCA"),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "slack_token": ("xox",),
    "slack_webhook": ("hooks.slack.com",),
    "google_api_key": ("AIza",),
    "stripe_key": ("_live_", "_test_"),
    "jwt": ("eyJ",),
    "url_password": ("://",),
    "bearer_token": ("Bearer",),
}


def redact_text(text: str) -> str:
    """Replace every secret found in `text` with `[REDACTED:<kind>]`."""
    if not text or not _may_hold_secret(text):
        return text
    key = _digest(text)
    if key in _clean:
        return text
    # Which rules may apply is judged once, on the text as it came: a marker
    # written by one rule never gives a later rule anything to find.
    lowered = _folded(text)
    applies: dict[str, bool] = {}
    out = text
    for kind, pattern, replacement in _RULES:
        if kind not in applies:
            applies[kind] = _rule_may_apply(kind, text, lowered)
        if applies[kind] and _may_match(pattern, text, lowered):
            out = pattern.sub(replacement if replacement is not None else marker(kind), out)
    if out == text:
        _found_clean(key)
    return out


# Texts the rules ran on and found nothing in, by digest. The same text is often redacted twice: an
# event's strings when the API accepts it (`sanitize`), then again at the storage door when its
# payload is written to the inbox, and a prompt's words again as its record. The rules are a pure
# function of the text, so a text they left unchanged once they leave unchanged again: the second
# call is a lookup. Only clean texts are remembered (no secret is kept here, even as a digest), and
# a 128-bit BLAKE2b digest cannot be made to collide, so a text holding a secret is never taken for
# one that was clean. FIFO-bounded: 16,384 digests, about 1.5 MB.
CLEAN_REMEMBERED = 16384
_clean: dict[bytes, None] = {}
_clean_lock = threading.Lock()


def _digest(text: str) -> bytes:
    # surrogatepass: a lone surrogate (valid in a JSON string) encodes too, one byte string per text.
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _found_clean(key: bytes) -> None:
    with _clean_lock:
        _clean[key] = None
        while len(_clean) > CLEAN_REMEMBERED:
            del _clean[next(iter(_clean))]


def forget_clean_texts() -> None:
    """Drop the digests of clean texts (the worker hands its memory back when idle)."""
    with _clean_lock:
        _clean.clear()


_CONTEXT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "aws_secret_key": ("aws",),
    "authorization": ("authorization",),
    "url_secret": ("=",),
    "cli_secret": ("--",),
    # The secret words of `_SECRET_WORDS` / `_ENV_SECRET_WORDS`, no shorter: a
    # bare "pass" (as in "3 passed") would send most test output through the rules.
    "secret_assignment": (
        "passw", "passphrase", "secret", "token", "key", "credential", "mysql_pwd",
    ),
    "cli_password": ("-p'", '-p"', "mysql", "mariadb", "sshpass", "login", "redis-cli", "curl", "wget"),
    "prose_password": ("passw", "passphrase", "passcode", "pw", "密码", "口令"),
}  # fmt: skip

# Rules that need no word at all, only a shape: a run long enough to be the key.
_SHAPES: dict[str, re.Pattern[str]] = {"bare_aws_secret": re.compile(r"[A-Za-z0-9/+]{40}")}


def _any_of(words: tuple[str, ...] | set[str], *, ignore_case: bool) -> str:
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    # Case-insensitive the way the rules are (re's Unicode folding: `ſecret` is
    # `secret` to them), which a substring test on text.lower() is not.
    return f"(?i:{alternatives})" if ignore_case else alternatives


_CONTEXT_PATTERNS = {kind: re.compile(_any_of(words, ignore_case=True)) for kind, words in _CONTEXT_KEYWORDS.items()}


# The characters re's case-insensitive matching takes for an ASCII letter that str.lower() does not
# turn into it: dotless ı and long ſ (re's own equivalences), and İ, whose full lower case is two
# characters. With them replaced, each character of the lower-cased text is an ASCII letter, digit
# or sign exactly when re would match it to that one (checked over every code point in tests).
def _folded(text: str) -> str:
    """`text` lower-cased as re's IGNORECASE compares it with the ASCII and CJK keywords, one character for one:
    a substring test on it finds a keyword exactly where the case-insensitive pattern would, several times faster."""
    if text.isascii():
        return text.lower()
    return text.replace("ı", "i").replace("ſ", "s").replace("İ", "i").lower()  # str.translate is slower


def _rule_may_apply(kind: str, text: str, lowered: str | None) -> bool:
    """Cheap pre-check: a provider rule needs its needle, a context rule a keyword, a bare key its shape.

    `lowered` is the text as `_folded` gives it (None: ask the keyword pattern).
    """
    needles = _NEEDLES.get(kind)
    if needles is not None:
        return any(n in text for n in needles)
    shape = _SHAPES.get(kind)
    if shape is not None:
        return shape.search(text) is not None
    if lowered is not None and kind in _CONTEXT_KEYWORDS:
        return any(word in lowered for word in _CONTEXT_KEYWORDS[kind])
    context = _CONTEXT_PATTERNS.get(kind)
    return context is None or context.search(text) is not None


def _build_gates() -> tuple[str, ...] | None:
    """What any rule needs to find, as lower-case words; None if some rule needs nothing.

    Most captured strings (ids, paths, plain output) contain none of it, and one
    scan rejects them for a fraction of what checking rule by rule costs.
    """
    kinds = {kind for kind, _, _ in _RULES if kind not in _SHAPES}
    if any(kind not in _NEEDLES and kind not in _CONTEXT_KEYWORDS for kind in kinds):
        return None
    needles = {n for kind in kinds for n in _NEEDLES.get(kind, ())}
    keywords = {w for kind in kinds for w in _CONTEXT_KEYWORDS.get(kind, ())}
    # Needles lower-cased too: a text that only seems to hold one (in another case) goes to the rules,
    # which look again; none that holds one is missed.
    words = {w.lower() for w in needles | keywords}
    # A word that contains another adds nothing: the shorter one is found whenever it is.
    return tuple(sorted(w for w in words if not any(other != w and other in w for other in words)))


_GATES = _build_gates()


def _may_hold_secret(text: str) -> bool:
    if _GATES is None:
        return True
    if _may_hold_word(text, _GATES):
        return True
    return len(text) >= _SHORTEST_SHAPE and any(shape.search(text) for shape in _SHAPES.values())


_SHORTEST_SHAPE = 40


def _may_hold_word(text: str, words: tuple[str, ...]) -> bool:
    # Substring tests on the folded text find a keyword wherever the rules' case-insensitive patterns
    # would (`_folded`), many times faster than one pattern of them all on text that is not ASCII.
    lowered = _folded(text)
    for word in words:
        if word in lowered:
            return True
    return False


# --- judging a candidate value ------------------------------------------------------


def _redact_if(match: re.Match[str], judge: Callable[[str], bool], kind: str) -> str:
    """Redact group 2 of `match` when `judge` finds its value secret-like; else leave it."""
    value = match.group(2)
    if value.startswith(MARKER_PREFIX) or not judge(value):
        return match.group(0)
    return _keep_group(2, kind)(match)


# What follows "password is/:" in ordinary text and is no password.
_NOT_PASSWORDS = frozenset(
    "none null true false required optional incorrect invalid wrong empty missing correct valid expired "
    "changed reset hashed stored encrypted sha1 sha256 sha512 md5 bcrypt argon2 argon2id pbkdf2 scrypt "
    "utf-8 utf8 base64 string str bytes int".split()
)
_CODE_LIKE = re.compile(r"[(){}\[\]$<>%]|^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$|^[/~.]|^[a-z]+(?:_[a-z]+)+$")
_PASSWORD_CHAR = re.compile(r"[0-9!@#^&*+=?/|:;,~_-]|.[A-Z]")


def _password_like(value: str) -> bool:
    """Whether a value written after "password is/:" looks like one.

    Quoted: anything but a template. Bare: not code (calls, attribute paths,
    `${VAR}`, file paths), not a masked `****`, not a word ordinary text puts
    there, and it has a digit, a symbol or an inner capital: "hunter2" is a
    password, "required" is not.
    """
    quoted = value[:1] in "'\"`" and value[-1:] == value[:1]
    inner = value[1:-1] if quoted else value.rstrip(".,;:!?)")
    if not inner.strip() or set(inner) <= set("*x•·."):
        return False
    if quoted:
        return not re.search(r"[{}$<>%]", inner)
    if len(inner) < 4 or inner.lower() in _NOT_PASSWORDS or _CODE_LIKE.search(inner):
        return False
    return _PASSWORD_CHAR.search(inner) is not None


_VERSION_LIKE = re.compile(r"v?\d+(?:[.-]\d+)+\w*", re.IGNORECASE)
_CAMEL_PART = re.compile(r"[A-Z][a-z]{2,}")
_SNAKE_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def _bare_password_like(value: str) -> bool:
    """Whether a value written straight after "password" (no "is", no ":") is one.

    A password by `_password_like`, and also letters with digits (what most
    passwords mix), not a command-line option, a path or a version: words and
    identifiers follow "password" in ordinary text far more often than secrets do.
    """
    quoted = value[:1] in "'\"`" and value[-1:] == value[:1]
    inner = value[1:-1] if quoted else value.rstrip(".,;:!?)")
    if len(inner) < 6 or inner[0] in "-+" or "/" in inner or "\\" in inner or _VERSION_LIKE.fullmatch(inner):
        return False
    if inner.isalnum() and len(_CAMEL_PART.findall(inner)) >= 2:
        return False  # an identifier: PBKDF2PasswordHasher
    if _SNAKE_NAME.fullmatch(inner):
        return False  # a name: pbkdf2_sha256, x86_64
    has_letter = re.search(r"[^\W\d_]", inner) is not None
    return has_letter and re.search(r"\d", inner) is not None and _password_like(inner)


_NOT_ASSIGNED_SECRET = re.compile(
    r"\d{1,3}(?:\.\d+)?"  # CHARS_PER_TOKEN = 3
    r"|\[[A-Z]{2,10}\]|<[a-z_]{2,10}>"  # pad_token="[PAD]", unk_token="<unk>"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"  # api_key=self.api_key
    r"|[a-z]+(?:_[a-z]+)+|[A-Z]+(?:_[A-Z]+)*"  # token = access_token, TOKEN = CHAR ^ CTL
    r"|[A-Za-z_]\w*[\[(].*"  # TOKEN: Final[str] = ..., api_key = get_key()
    # files matching 'SECRET_KEY': app/payments.py, a path to a source or config file
    r"|/?(?:[\w.-]+/)+[\w-]{2,}\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|json|toml|ya?ml|md|txt|rb|go|rs|java|kts?|c|h|cc|cpp|hpp"
    r"|cs|php|sh|env|ini|cfg|conf|html?|css|scss|sql|xml|lock|swift|ex|exs|vue|svelte|properties|gradle|tf)"
    r"|(?i:[\w.-]{0,40}" + _SECRET_WORDS + r")"  # password=password
)


def _assigned_value_like(value: str) -> bool:
    """A value assigned to a secret-named key that may be a secret: not masked, a placeholder or a variable."""
    quoted = value[:1] in "'\"" and value[-1:] == value[:1] and len(value) > 1
    inner = value[1:-1] if quoted else value.rstrip(",;")
    if not inner or set(inner) <= set("*x•·.") or inner.lower() in _NOT_PASSWORDS:
        return False
    return _NOT_ASSIGNED_SECRET.fullmatch(inner) is None


_HEX = frozenset("0123456789abcdefABCDEF")
_WORD_PART = re.compile(r"[A-Z]?[a-z]{3,}")


def _random_key_like(value: str) -> bool:
    """Whether a 40-character run is a random key rather than a hash or an identifier.

    Random keys mix upper case, lower case and digits with high entropy (≥ 4.2
    bits a character; 99.9 % of random 40-character base64 strings have ≥ 4.36),
    are not hex (git and SHA-1 hashes are), and are not made of words the way
    long CamelCase identifiers are (letters in runs like "Policy" cover at most
    24 of 40 characters in 99.9 % of random keys).
    """
    upper = sum(c.isupper() for c in value)
    lower = sum(c.islower() for c in value)
    if upper < 2 or lower < 2 or not any(c.isdigit() for c in value) or set(value) <= _HEX:
        return False
    if sum(len(part) for part in _WORD_PART.findall(value)) >= 24:
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 4.2


# --- secrets by key name --------------------------------------------------------

_SECRET_KEY_SUFFIXES = (
    "password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey",
    "privatekey", "secretkey", "authorization", "cookie", "credential", "credentials",
    "sessionkey", "signingkey", "encryptionkey",
)  # fmt: skip


@functools.lru_cache(maxsize=4096)  # hook payloads repeat the same few keys in every event
def is_secret_key(key: str) -> bool:
    """Whether a dict key names a secret (`password`, `api_key`, `X-Auth-Token`, ...).

    Matches on the key's end so that `max_tokens` or `author` are left alone.
    """
    normalized = re.sub(r"[^a-z0-9]", "", key.lower())
    return bool(normalized) and normalized.endswith(_SECRET_KEY_SUFFIXES)


# --- recursive helpers ------------------------------------------------------------


def _walk(value: Any, on_text: Callable[[str], str], on_secret_key: bool, max_items: int | None = None) -> Any:
    """`value` with `on_text` applied to every string; lists cut to `max_items` if given. With
    `on_secret_key`, an object's keys are redacted too: a key is free text to whoever wrote the
    object (`{"sk-ant-...": "token of the staging bot"}` is a secret at rest all the same)."""
    if isinstance(value, str):
        return on_text(value)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if on_secret_key and isinstance(key, str):
                key = redact_text(strip_private(key))
            if (
                on_secret_key
                and isinstance(key, str)
                and isinstance(item, str)
                and item
                and not item.startswith(MARKER_PREFIX)
                and is_secret_key(key)
            ):
                # Through on_text like any string (markers never match a rule): a
                # size limit applies to them too.
                out[key] = on_text(marker("secret_field"))
            else:
                out[key] = _walk(item, on_text, on_secret_key, max_items)
        return out
    if isinstance(value, (list, tuple)):
        kept = value if max_items is None else value[:max_items]
        items = [_walk(item, on_text, on_secret_key, max_items) for item in kept]
        if len(value) > len(kept):
            items.append(_more_items(len(value) - len(kept)))
        return items
    return value


def _more_items(count: int) -> str:
    return f"…[{count} more items]…"


def redact(value: Any) -> Any:
    """Redact secrets in a string or anywhere inside a JSON-like dict/list, keys included."""
    return _walk(value, lambda text: redact_text(strip_private(text)), on_secret_key=True)


def redact_stored(value: str) -> str:
    """A text column's value as it may be stored: secrets redacted, and when it is a JSON object or
    array (a record's data or metadata, an event's payload), inside it too, keys included.

    The storage door (memory_anchor/worker/store/db.py) passes every text it writes through
    here, so no writer can forget: reasons, actors, subjects, tags, descriptions, metadata.
    Text with nothing a rule or a secret key name could match comes back as it is, unparsed.
    """
    if not value or not (_may_hold_secret(value) or "cookie" in value.lower()):
        return value
    head = value.lstrip()[:1]
    if head in ("{", "["):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, (dict, list)):
            cleaned = _walk(parsed, redact_text, on_secret_key=True)
            return value if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)
    return redact_text(value)


# --- truncation -----------------------------------------------------------------


def truncate(value: str, max_chars: int) -> str:
    """Keep the head and tail of `value` around `…[truncated N chars]…`.

    The result is at most `max_chars` long (for any limit above ~40). The head
    gets two thirds: the start of an output says what ran, the end how it ended.
    """
    if not isinstance(value, str) or max_chars <= 0 or len(value) <= max_chars:
        return value
    head, tail, note = _cut_plan(len(value), max_chars)
    return value[:head] + note + (value[-tail:] if tail else "")


def _cut_plan(length: int, max_chars: int) -> tuple[int, int, str]:
    """(head chars, tail chars, marker) for cutting `length` chars to `max_chars`."""
    dropped = length - max_chars
    while True:  # the marker's own length depends on the number it prints
        note = f"…[truncated {dropped} chars]…"
        keep = max(max_chars - len(note), 0)
        if length - keep == dropped or keep == 0:
            break
        dropped = length - keep
    head = (keep * 2) // 3
    return head, keep - head, note


# Extra text kept on each side of a cut while redacting, so that a secret near
# the cut is seen whole before the final cut is made.
_CUT_MARGIN = 4096


def sanitize_text(text: str, max_chars: int | None = None) -> str:
    """`strip_private` + `redact_text` + `truncate`, in time bounded by `max_chars`.

    A huge string is cut to its head and tail (plus a margin, ending at a line
    break or space so no one-line secret straddles the cut) before redaction;
    redaction then never scans megabytes that truncation would drop anyway.
    """
    text = strip_private(text)
    if not max_chars or len(text) <= max_chars + 2 * _CUT_MARGIN:
        return truncate(redact_text(text), max_chars) if max_chars else redact_text(text)
    head_len, tail_len, note = _cut_plan(len(text), max_chars)
    head_end = _break_before(text, head_len + _CUT_MARGIN, head_len)
    tail_start = _break_after(text, len(text) - tail_len - _CUT_MARGIN, len(text) - tail_len)
    head = redact_text(text[:head_end])[:head_len]
    tail = redact_text(text[tail_start:])
    return head + note + (tail[-tail_len:] if tail_len else "")


def _break_before(text: str, pos: int, floor: int) -> int:
    """The last line break (else space) at or before `pos` but after `floor`."""
    for sep in ("\n", " "):
        found = text.rfind(sep, floor, pos)
        if found != -1:
            return found
    return pos


def _break_after(text: str, pos: int, ceiling: int) -> int:
    """The first line break (else space) at or after `pos` but before `ceiling`."""
    for sep in ("\n", " "):
        found = text.find(sep, pos, ceiling)
        if found != -1:
            return found + 1
    return pos


def truncate_fields(value: Any, max_chars: int, max_items: int = 1000) -> Any:
    """Truncate every string in a JSON-like value; long lists keep their first items."""
    return _walk(value, lambda text: truncate(text, max_chars), on_secret_key=False, max_items=max_items)


def sanitize(value: Any, max_chars: int | None = None, max_items: int = 1000) -> Any:
    """Everything stored or sent goes through this: private spans, secrets, size.

    `max_chars` bounds each string (None: no truncation); lists keep their first
    `max_items` items when a limit is given.
    """
    # One walk does it all: each string is cleaned and cut by sanitize_text, lists are cut here.
    return _walk(
        value, lambda text: sanitize_text(text, max_chars), on_secret_key=True, max_items=max_items if max_chars else None
    )
