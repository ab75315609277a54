"""Secrets and private spans never survive redaction; ordinary text is untouched."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_anchor.core.redact import (
    is_secret_key,
    redact,
    redact_text,
    sanitize,
    sanitize_text,
    strip_private,
    truncate,
    truncate_fields,
)

# (kind, text containing the secret, the secret itself)
SECRETS = [
    ("anthropic_key", "export KEY_A=x; key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdEF here", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdEF"),
    ("anthropic_key", "ANTHROPIC_API_KEY is sk-ant-fake", "sk-ant-fake"),
    ("openai_key", "client = OpenAI(api_key=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56)", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"),
    ("openai_key", "old key: sk-1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL", "sk-1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"),
    ("aws_access_key", "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws_secret_key", '{"AWS_SECRET_ACCESS_KEY": "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}', "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"),
    ("github_token", "git clone https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("github_token", "GH=gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("github_token", "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH"),
    ("slack_token", "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack_token", "user token xoxp-1234-5678-91011-abcdef0123456789", "xoxp-1234-5678-91011-abcdef0123456789"),
    ("google_api_key", "maps?key=AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI&q=x", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI"),
    ("stripe_key", "stripe.api_key = sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe_key", "restricted rk_live_51H8abcdefghijklmnopqrst", "rk_live_51H8abcdefghijklmnopqrst"),
    ("jwt", "cookie: session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c;", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    ("authorization", "curl -H 'Authorization: Bearer abc123.def456-ghi789' https://api.x.io", "abc123.def456-ghi789"),
    ("authorization", '{"headers": "authorization: Basic dXNlcjpodW50ZXIy"}', "dXNlcjpodW50ZXIy"),
    ("bearer_token", "sent Bearer 0123456789abcdefABCDEF0123 to the API", "0123456789abcdefABCDEF0123"),
    ("url_password", "DATABASE_URL_X postgres://admin:Sup3rS3cret!@db.internal:5432/app", "Sup3rS3cret!"),
    ("url_password", "pip install --index-url https://user:t0ps3cret@pypi.corp.example/simple pkg", "t0ps3cret"),
    ("secret_assignment", "export DB_PASSWORD=hunter2", "hunter2"),
    ("secret_assignment", "GITHUB_TOKEN=\"abc def ghi\" make release", "abc def ghi"),
    ("secret_assignment", "MY_SERVICE_SECRET='s3cr3t-value'", "s3cr3t-value"),
    ("secret_assignment", "API_KEY=zzzyyyxxx111 ./run.sh", "zzzyyyxxx111"),
    ("secret_assignment", "password: hunter22\nport: 5432", "hunter22"),
    ("secret_assignment", 'cfg = {"password": "correct horse battery staple"}', "correct horse battery staple"),
    ("secret_assignment", "db.password=p4ssw0rd!!", "p4ssw0rd!!"),
    ("secret_assignment", "client_secret = 'abcd1234efgh'", "abcd1234efgh"),
    ("cli_secret", "mysqladmin --password=Xy9zzq1 status", "Xy9zzq1"),
    ("url_secret", "GET https://api.example.com/v1/data?api_key=9f8e7d6c5b4a&limit=10", "9f8e7d6c5b4a"),
    ("slack_webhook", "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXXXXXXXXXX"),
    # Passwords given to command-line tools.
    ("cli_password", "mysql -u root -p'Qx7!pass-word' shop", "Qx7!pass-word"),
    ("cli_password", 'mariadb -uroot -p"my db pass" shop', "my db pass"),
    ("cli_password", "mysqldump -h db -u app -pZz9yy8wq app > dump.sql", "Zz9yy8wq"),
    ("secret_assignment", "PGPASSWORD=pg-secret-77 psql -h db -U app", "pg-secret-77"),
    ("secret_assignment", "MYSQL_PWD=abc12345 mysql -u root", "abc12345"),
    ("cli_password", "sshpass -p 'hunter2-ssh' ssh root@10.0.0.5", "hunter2-ssh"),
    ("cli_password", "sshpass -p Hunter2ssh ssh root@10.0.0.5", "Hunter2ssh"),
    ("cli_password", "docker login -u me -p dckr_pat_abc123xyz registry.example", "dckr_pat_abc123xyz"),
    ("cli_password", "redis-cli -h cache -a R3disPassw0rd ping", "R3disPassw0rd"),
    ("cli_password", "curl -u admin:s3cr3tpass https://x.example/api", "s3cr3tpass"),
    ("cli_secret", "psql --password Sekret99x -U app", "Sekret99x"),
    ("cli_secret", "tool --db-password=Sekret99y run", "Sekret99y"),
    # Passwords written in prose.
    ("prose_password", "the admin password is hunter2x", "hunter2x"),
    ("prose_password", "FYI the password for root is 'toor-toor', rotate it", "toor-toor"),
    ("prose_password", "my pw: Qwerty!234 (don't share)", "Qwerty!234"),
    ("prose_password", "wifi passwd was Sunny#Day42.", "Sunny#Day42"),
    ("prose_password", "数据库密码是 Sh4ngHai2024", "Sh4ngHai2024"),
    # The value straight after the word, with no "is" or ":" between (issue 25, found through mem0 add).
    ("prose_password", "the staging db user is admin and password CorrectHorse-Battery7", "CorrectHorse-Battery7"),
    ("prose_password", "then set the password to Tr0ub4dor&3 for prod.", "Tr0ub4dor&3"),
    # Keys by their shape alone.
    ("aws_secret_key", "here it is: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws_secret_key", "creds 9drTJvcXLB89EXAMPLEm1Q2w3E4r5T6y7U8i9O0p use them", "9drTJvcXLB89EXAMPLEm1Q2w3E4r5T6y7U8i9O0p"),
    ("gitlab_token", "remote: glpat-xZ8r2Kq9Wm4Tn7Pv3Ls1 expired", "glpat-xZ8r2Kq9Wm4Tn7Pv3Ls1"),
    ("npm_token", "//registry.npmjs.org/:_authToken npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    ("huggingface_token", "login with hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
]

PRIVATE_KEY = """-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACBGVmFsdWVzIGZvciB0ZXN0aW5nIG9ubHkgMTIzNDU2Nzg5MAAAAJiW
-----END OPENSSH PRIVATE KEY-----"""


@pytest.mark.parametrize("kind,text,secret", SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)])
def test_each_secret_kind_is_redacted(kind: str, text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert "[REDACTED:" in out


@pytest.mark.parametrize(
    "text,kind",
    [
        ("export DB_PASSWORD=hunter2", "secret_assignment"),
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "anthropic_key"),
        ("id AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("curl -H 'Authorization: Bearer abc123.def456-ghi789'", "authorization"),
        ("postgres://admin:pw1234@db:5432/app", "url_password"),
    ],
)
def test_marker_names_the_kind_and_keeps_context(text: str, kind: str) -> None:
    out = redact_text(text)
    assert f"[REDACTED:{kind}]" in out
    # what surrounds the secret stays readable
    assert out.split("[REDACTED:")[0] == text[: len(out.split("[REDACTED:")[0])]


def test_private_key_block_removed_whole_and_text_after_kept() -> None:
    out = redact_text(f"before\n{PRIVATE_KEY}\nafter")
    assert out == "before\n[REDACTED:private_key]\nafter"
    rsa = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"
    assert redact_text(rsa) == "[REDACTED:private_key]"


def test_cut_private_key_is_redacted_from_either_side() -> None:
    head_only = PRIVATE_KEY.split("-----END")[0]
    assert "b3BlbnNz" not in redact_text("x\n" + head_only)
    tail_only = "\n".join(PRIVATE_KEY.splitlines()[1:])
    out = redact_text("output:\n" + tail_only + "\ndone")
    assert "QyNTUxOQ" not in out and out.endswith("done") and out.startswith("output:")


ORDINARY = [
    "def tokenize(text): return text.split()",
    "max_tokens = 4096; input_tokens: 12",
    "SyntaxError: Unexpected token: ')'",
    "PWD=/home/dev/project\nTOKENIZERS_PARALLELISM=false\nMAX_TOKENS=100",
    "password = request.form.get(field)",
    "The author reset the password policy; see docs/password-policy.md",
    "scikit-learn==1.5.0 and desk-lamp-controller",
    "http://localhost:8080/path@v2 and https://example.com/a?page=2&sort=asc",
    "git commit -m 'Fix bearer of bad news' && ls -la",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'secret'",
    "SELECT id, name FROM users WHERE email = 'a@b.c';",
    "这是普通的中文文本，没有任何秘密。",
    # Look-alikes of the command-line, prose and shape rules.
    "mkdir -p build/out && ssh -p 2222 host && docker run -p 8080:80 img",
    "mysql -u root -p shop",  # -p then a space: mysql prompts for the password
    "pytest -p no:cacheprovider; git log --pretty=format:%H --no-password --verbose",
    "the password is required and the password is hashed with sha256",
    # Look-alikes of a value straight after the word: words, options, paths, versions, identifiers.
    "password hashers, password reset e-mails and the password validation of Django 3.1",
    "sudo passwd --delete bob2; passwd -l alice; pwd 2>/dev/null",
    "see password auth/hashers2.py, password v4.0.1 and the password PBKDF2PasswordHasher",
    "the default password pbkdf2_sha256 hasher, built for x86_64; compare password1 and password2",
    "if password is None: password: str = getpass.getpass()",
    "password: Optional[str] = None\npassword = args.password\npassword=password\npassword: ********",
    "Password: ${DB_PASSWORD}\npw = pw.strip()",
    "pad_token=\"[PAD]\", unk_token=\"<unk>\"; CHARS_PER_TOKEN = 3",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b\nMerge: 4E1243BD22C66E76C2BA9EDDC1F91394E57F9F83",
    "class V1PodFailurePolicyOnExitCodesRequirement and BetaAsyncAbstractComputerToolset20260801",
    "/home/runner/work/MemoryAnchor/src/Components/Header42/index",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact_text(text) == text


def test_redaction_is_idempotent() -> None:
    for _, text, _ in SECRETS:
        once = redact_text(text)
        assert redact_text(once) == once


def test_markers_are_never_taken_for_credentials() -> None:
    # a token in the user part of a URL must not make the marker look like user:password
    out = redact_text("git push https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r")
    assert out == "git push https://[REDACTED:github_token]@github.com/o/r"


def test_private_spans_are_dropped() -> None:
    assert strip_private("a <private>my ssn 123</private> b") == "a  b"
    assert strip_private("x <PRIVATE>multi\nline</Private> y <private>two</private>") == "x  y "
    assert strip_private("keep <private>unclosed secret to the end") == "keep "
    assert redact({"prompt": "use <private>sk-ant-xyz1234 token</private> please"}) == {"prompt": "use  please"}


def test_secret_keys_by_name() -> None:
    for key in ("password", "api_key", "apiKey", "X-Auth-Token", "client_secret", "Authorization", "aws_secret_access_key", "DB_PASSWORD", "cookie"):
        assert is_secret_key(key), key
    for key in ("max_tokens", "input_tokens", "author", "tool_use_id", "description", "secretary_name", "token_count", "passed"):
        assert not is_secret_key(key), key


NESTED = {
    "session_id": "abc",
    "tool_name": "Bash",
    "tool_input": {"command": "curl -u admin:pw https://x", "env": {"GITHUB_TOKEN": "plain-value-1", "password": "plain-value-2"}},
    "tool_response": {
        "stdout": "OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56\nok",
        "blocks": [{"type": "text", "text": "here: AKIAIOSFODNN7EXAMPLE"}, ["deeper", {"apiKey": "plain-value-3"}]],
        "numbers": [1, 2.5, None, True],
        "max_tokens": 100,
    },
    "tuple": ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", 3),
}
NESTED_SECRETS = ["plain-value-1", "plain-value-2", "plain-value-3", "sk-proj-Ab12Cd34", "AKIAIOSFODNN7EXAMPLE", "ghp_16C7e42F"]


def test_no_secret_survives_in_any_nested_field() -> None:
    original = json.dumps(NESTED, default=list)
    out = redact(NESTED)
    dumped = json.dumps(out)
    for secret in NESTED_SECRETS:
        assert secret not in dumped, secret
    # structure and non-secret values are preserved, the input is not modified
    assert out["session_id"] == "abc" and out["tool_name"] == "Bash"
    assert out["tool_response"]["numbers"] == [1, 2.5, None, True]
    assert out["tool_response"]["max_tokens"] == 100
    assert out["tool_response"]["stdout"].endswith("\nok")
    assert json.dumps(NESTED, default=list) == original


def test_truncate_keeps_head_and_tail_with_marker() -> None:
    value = "HEAD" + "x" * 10_000 + "TAIL"
    out = truncate(value, 1000)
    assert len(out) <= 1000
    assert out.startswith("HEAD") and out.endswith("TAIL")
    dropped = int(out.split("…[truncated ")[1].split(" chars]…")[0])
    assert len(out) - len(f"…[truncated {dropped} chars]…") + dropped == len(value)
    assert truncate("short", 1000) == "short"


def test_five_megabyte_output_is_truncated_not_rejected() -> None:
    secret_at_end = "\nexport STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc\nBUILD OK"
    big = "log line with nothing special in it, id=42\n" * 120_000 + secret_at_end
    assert len(big) > 5_000_000
    out = sanitize({"tool_response": {"stdout": big}}, 20_000)  # its speed: `memory-anchor bench redaction`
    stdout = out["tool_response"]["stdout"]
    assert len(stdout) <= 20_000
    assert "…[truncated" in stdout and stdout.endswith("BUILD OK")
    assert "sk_live_4eC39" not in stdout


def test_secret_straddling_the_cut_does_not_leak() -> None:
    # a long line of secrets right where the head is cut
    filler = "a" * 13_300
    text = filler + " ".join(["sk-ant-api03-" + "K" * 40] * 50) + "\n" + "b" * 30_000
    out = sanitize_text(text, 20_000)
    assert "KKKK" not in out


def test_truncate_fields_limits_long_lists() -> None:
    out = truncate_fields({"files": [f"f{i}" for i in range(5000)]}, 100, max_items=10)
    assert out["files"][:10] == [f"f{i}" for i in range(10)]
    assert out["files"][-1] == "…[4990 more items]…"


def test_sanitize_limits_long_lists_in_the_same_pass() -> None:
    out = sanitize({"files": [f"f{i}" for i in range(5000)], "password": "hunter2"}, 100, max_items=10)
    assert out["files"][:10] == [f"f{i}" for i in range(10)]
    assert out["files"][-1] == "…[4990 more items]…"
    assert out["password"] == "[REDACTED:secret_field]"


@pytest.mark.parametrize(
    "text",
    [
        'ſecret = "hunter22"',  # the rules' case folding: U+017F long s is an s to them
        "3 passed; DB_PASSWORD=hunter22",
        "3 passed\npassword: hunter22",
        # Text that is not ASCII, where the pre-checks fold case themselves
        '✅ ſecret = "hunter22"',
        "→ LOGİN: mysql -uroot -phunter22 db",
        "— DB_PASSWORD=hunter22 ✓",
        "密码: hunter22",
    ],
)
def test_the_cheap_pre_checks_never_hide_a_secret_from_the_rules(text: str) -> None:
    assert "hunter22" not in redact_text(text)


def test_the_pre_checks_fold_every_character_as_the_rules_patterns_do() -> None:
    """A keyword is found in the folded text exactly where a case-insensitive pattern finds it: each
    character of the text folds to a keyword's character just when re matches it to that one."""
    import re
    import sys

    from memory_anchor.core.redact import _GATES, _SECRET_WORDS, _folded

    assert _GATES is not None
    # The gates' words, and the secret words the assignment rules' first looks find in folded text.
    alphabet = sorted({c for word in _GATES for c in word} | set(re.sub(r"[^a-z]", "", _SECRET_WORDS)))
    any_of = re.compile("(?i:[" + "".join(re.escape(c) for c in alphabet) + "])")
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        folded = _folded(char)
        assert len(folded) == 1, hex(code)  # one for one: a keyword never straddles a character's folding
        if any_of.fullmatch(char):
            assert folded in alphabet and re.fullmatch(f"(?i:{re.escape(folded)})", char), hex(code)
        else:
            assert folded not in alphabet, hex(code)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values, secret=st.sampled_from([s for _, _, s in SECRETS if len(s) >= 12]))
def test_fuzz_secret_planted_anywhere_is_gone(value, secret: str) -> None:
    text_with_secret = next(t for _, t, s in SECRETS if s == secret)
    planted = {"wrapper": [value, {"note": text_with_secret}], "other": value}
    out = sanitize(planted, 500)
    assert secret not in json.dumps(out, ensure_ascii=False)


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_fuzz_any_shape_never_raises_and_keeps_shape(value) -> None:
    out = sanitize(value, 100)
    assert type(out) is type(value) or isinstance(value, tuple)


def test_ids_and_hashes_are_never_taken_for_keys() -> None:
    """Captured text is full of ids: none of these shapes may be judged a key."""
    import hashlib
    import random
    import string
    import uuid

    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits
    ids = []
    for i in range(2000):
        ids.append(hashlib.sha1(str(i).encode()).hexdigest())
        ids.append(hashlib.sha1(str(i).encode()).hexdigest().upper())
        ids.append(hashlib.sha256(str(i).encode()).hexdigest())
        ids.append(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
        ids.append("toolu_01" + "".join(rng.choice(alphabet) for _ in range(22)))
    text = "\n".join(ids)
    assert redact_text(text) == text


def test_random_forty_character_keys_are_judged_keys() -> None:
    """The shape rule catches random 40-character base64 keys (the AWS secret shape) nearly always."""
    import random
    import string

    rng = random.Random(11)
    alphabet = string.ascii_letters + string.digits + "/+"
    keys = ["".join(rng.choice(alphabet) for _ in range(40)) for _ in range(1000)]
    missed = [k for k in keys if k in redact_text(f"key {k} end")]
    assert len(missed) <= 20, missed[:5]  # the class and entropy limits let a few per cent through at most


def test_files_named_after_a_secret_key_are_not_its_value():
    """A search summary names the files a key is read in: the door redacts every stored text again,
    and a path is not the key's value (a password with a slash still is)."""
    found = "2 files match 'STRIPE_SECRET_KEY': app/payments.py, config/settings.py"
    assert redact_text(found) == found
    assert "hunter2" not in redact_text("DB_PASSWORD=hunter2/x.y")


def test_a_text_found_clean_is_a_lookup_the_next_time_and_a_secret_never_is() -> None:
    """The storage door redacts again what the API's sanitize redacted: a text the rules left
    unchanged is remembered (by digest) and not run through them again; one they changed is not."""
    import memory_anchor.core.redact as redact_module

    redact_module.forget_clean_texts()
    clean = "token budget: 3 passed, max_tokens=512 --verbose"  # gets past the pre-checks, holds no secret
    assert redact_module._may_hold_secret(clean)
    assert redact_text(clean) == clean
    assert redact_module._digest(clean) in redact_module._clean
    assert redact_text("".join(clean)) == clean  # an equal text made anew: found by content, not identity

    for _, text, secret in SECRETS:
        assert secret not in redact_text(text)
        assert redact_module._digest(text) not in redact_module._clean
        assert secret not in redact_text(text)  # the second time too

    # The door's pass over a payload the API sanitized gives what a first pass gives.
    payload = {"tool_input": {"command": clean}, "note": SECRETS[0][1], "env": {"API_TOKEN": "abc123xyz"}}
    stored = json.dumps(sanitize(payload), ensure_ascii=False)
    again = redact_module.redact_stored(stored)
    redact_module.forget_clean_texts()
    assert again == redact_module.redact_stored(stored) == stored
    assert SECRETS[0][2] not in again and "abc123xyz" not in again


def test_the_clean_texts_remembered_are_bounded() -> None:
    import memory_anchor.core.redact as redact_module

    redact_module.forget_clean_texts()
    for n in range(redact_module.CLEAN_REMEMBERED + 100):
        assert redact_text(f"--flag {n}") == f"--flag {n}"
    assert len(redact_module._clean) == redact_module.CLEAN_REMEMBERED
    assert redact_module._digest("--flag 0") not in redact_module._clean  # the oldest went first
    assert redact_module._digest(f"--flag {redact_module.CLEAN_REMEMBERED + 99}") in redact_module._clean
    redact_module.forget_clean_texts()
    assert not redact_module._clean


assignment_texts = st.lists(
    st.sampled_from([
        "password", "PASSWORD", "PaSsWd", "paſſphrase", "ſecret", "SECRET", "token", "Token", "TOKEN", "api_key",
        "API-KEY", "apiKEY", "acceſs_key", "private-\u212aey", "PRIVATE_KEY", "credentials", "CREDENTIAL",
        "MYSQL_PWD", "DB_", "AWS_", "_ID", "_FILE", "db.", "=", ":", " = ", ": ", "\t", "\n", " ", '"', "'", "`",
        "hunter22", "Tr0ub4dor&3", "${TOKEN}", "abc", "x", "İ", "ı", "é", "✅", "(", ")", "-", "_", ".",
    ]),
    max_size=14,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=assignment_texts)
def test_the_assignment_rules_first_looks_find_every_match(text: str) -> None:
    """A slow rule runs only where its first look finds something: that look must find every
    text the rule would match (else a secret would be left in clear), on any spelling."""
    from memory_anchor.core.redact import _FIRST_LOOKS, _folded

    for rule, (look, folded) in _FIRST_LOOKS.items():
        if rule.search(text):
            assert look.search(_folded(text) if folded else text), (rule.pattern, text)


def test_the_first_looks_change_nothing_that_is_redacted() -> None:
    import memory_anchor.core.redact as redact_module

    texts = [text for _, text, _ in SECRETS] + ORDINARY + [
        'config: {"api_key": "Zx81-long-value", "name": "x"}', "DB_PASSWORD=S3cr3t-val; export TOKEN_FILE=/run/tok",
        "  db.password = hunter2-prod\n  user = bob", "ſecret: 'Tr0ub4dor&3'", "PRIVATE_\u212aEY = 'abc123def'",
    ]
    looks = dict(redact_module._FIRST_LOOKS)
    try:
        redact_module.forget_clean_texts()
        fast = [redact_text(text) for text in texts]
        redact_module._FIRST_LOOKS.clear()
        redact_module.forget_clean_texts()
        assert [redact_text(text) for text in texts] == fast
    finally:
        redact_module._FIRST_LOOKS.update(looks)
        redact_module.forget_clean_texts()
