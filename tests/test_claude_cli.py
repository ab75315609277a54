"""The CLI route with the real pinned Claude Code CLI, logged in the way a user is, against the fake API.

Each test gets a HOME where `claude` is logged in through an `apiKeyHelper` in
`~/.claude/settings.json` and nothing else: no `ANTHROPIC_API_KEY` anywhere,
only `ANTHROPIC_BASE_URL` pointing at the fake Messages API. That HOME also has
a user-level hook, an MCP server and a CLAUDE.md, to show that the session the
worker spawns loads none of them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memory_anchor.schemas.settings import Settings
from tests.conftest import tool_use_event
from tests.e2e.harness import claude_or_skip, pinned_cli
from tests.fakes.anthropic_server import FakeAnthropicServer, error_reply, json_reply
from memory_anchor.worker.llm.client import ClaudeClient, LLMError, LLMUnavailable
from memory_anchor.worker.pipeline.compress import claude as prompts
from memory_anchor.worker.pipeline.compress.local import compress_tool_use
from memory_anchor.worker.store.db import Database

pytestmark = pytest.mark.e2e
HELPER_KEY = "sk-ant-helper-login"


@pytest.fixture
def claude_bin() -> Path:
    return claude_or_skip()


@pytest.fixture
def fake_api():
    with FakeAnthropicServer(api_key=HELPER_KEY) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, fake_api, monkeypatch) -> Path:
    """A user's HOME: logged in through an apiKeyHelper; a hook, an MCP server and a CLAUDE.md that must stay unused."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    marker = home / "markers"
    marker.mkdir()
    hook = {"hooks": [{"type": "command", "command": f"touch {marker}/hook-ran"}]}
    settings = {
        # The helper also writes down the environment `claude` gives it: the spawned session's own.
        "apiKeyHelper": f"env > {marker}/helper-env; echo {HELPER_KEY}",
        "hooks": {event: [hook] for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")},
    }
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    (home / ".claude" / "CLAUDE.md").write_text("PRIVATE-USER-INSTRUCTIONS must not reach the distiller\n")
    mcp = {"mcpServers": {"probe": {"command": "sh", "args": ["-c", f"touch {marker}/mcp-ran; sleep 30"]}}}
    (home / ".claude.json").write_text(json.dumps(mcp))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for name in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDECODE", "1")  # as in a worker started by a Claude Code hook
    return home


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "memory.sqlite3")
    yield database
    database.close()


def cli_client(db, claude_bin: Path, **settings) -> ClaudeClient:
    """What a worker without a key builds: the route is chosen, not forced."""
    return ClaudeClient(Settings(claude_cli_path=str(claude_bin), **settings), db, sleep=lambda s: None)


def test_without_a_key_the_worker_distils_through_the_claude_code_login(claude_bin, home, fake_api, db) -> None:
    fake_api.enqueue(json_reply({"observations": [{"index": 0, "title": "Ran the tests"}]}))
    client = cli_client(db, claude_bin, llm_model="claude-haiku-4-5")
    assert client.route.name == "cli"
    assert client.route.reason == (
        f"no ANTHROPIC_API_KEY; Claude Code CLI {pinned_cli('newest').version} at {claude_bin} (the claude_cli_path setting), "
        "logged in via api_key_helper"
    )

    reply = client.complete_json("You compress tool uses.", "Bash: pytest -q -> 3 passed", max_tokens=600)
    assert reply == {"observations": [{"index": 0, "title": "Ran the tests"}]}

    (request,) = fake_api.messages()
    # Our short system prompt, not Claude Code's; no tools; no thinking; our max_tokens and model.
    system = "\n".join(block["text"] for block in request["system"])
    assert "You compress tool uses." in system and len(system) < 600
    assert request.get("tools") in (None, [])
    assert "thinking" not in request and request["max_tokens"] == 600 and request["model"] == "claude-haiku-4-5"
    text = json.dumps(request["messages"])
    assert "Bash: pytest -q -> 3 passed" in text and "PRIVATE-USER-INSTRUCTIONS" not in text
    headers = {k.lower(): v for k, v in fake_api.requests[-1].headers.items()}
    assert headers.get("x-api-key") == HELPER_KEY  # the user's own login, not a key of ours
    usage = client.usage_today()
    assert usage["calls"] == 1 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0

    markers = home / "markers"
    assert not (markers / "hook-ran").exists(), "a user hook ran in the spawned session"
    assert not (markers / "mcp-ran").exists(), "an MCP server was started for the spawned session"
    child_env = dict(line.split("=", 1) for line in (markers / "helper-env").read_text().splitlines() if "=" in line)
    assert child_env["MEMORY_ANCHOR_SPAWNED"] == "1" and "CLAUDECODE" not in child_env
    # No transcript in the user's session history.
    transcripts = [p for p in (home / ".claude").rglob("*.jsonl")]
    assert transcripts == [], transcripts


def test_a_subscription_login_works_too(claude_bin, home, fake_api, db) -> None:
    """Most users: a claude.ai subscription (OAuth credentials), no apiKeyHelper."""
    token = "sk-ant-oat01-subscription-token"
    credentials = {"claudeAiOauth": {
        "accessToken": token, "refreshToken": "sk-ant-ort01-refresh", "expiresAt": 4_102_444_800_000,
        "scopes": ["user:inference", "user:profile", "user:sessions:claude_code"], "subscriptionType": "max",
    }}  # fmt: skip
    (home / ".claude" / "settings.json").write_text("{}")
    path = home / ".claude" / ".credentials.json"
    path.write_text(json.dumps(credentials))
    path.chmod(0o600)
    fake_api.api_key = token
    fake_api.enqueue(json_reply({"ok": "subscription"}))
    client = cli_client(db, claude_bin)
    assert client.route.reason.endswith("logged in via claude.ai")
    assert client.complete_json("s", "p") == {"ok": "subscription"}
    headers = {k.lower(): v for k, v in fake_api.requests[-1].headers.items()}
    assert headers["authorization"] == f"Bearer {token}" and "oauth" in headers.get("anthropic-beta", "")


def test_transient_errors_are_retried_and_rejections_are_not(claude_bin, home, fake_api, db) -> None:
    fake_api.enqueue(error_reply(529), json_reply({"ok": True}))
    sleeps: list[float] = []
    client = ClaudeClient(Settings(claude_cli_path=str(claude_bin), llm_max_retries=2), db, sleep=sleeps.append)
    assert client.complete_json("s", "p") == {"ok": True}
    assert len(fake_api.messages()) == 2 and len(sleeps) == 1  # Claude Code's own retries are off: ours count

    fake_api.enqueue(error_reply(400, "prompt is too long"))
    with pytest.raises(LLMError) as caught:
        client.complete_json("s", "p")
    assert not caught.value.retryable and "HTTP 400" in str(caught.value) and "prompt is too long" in str(caught.value).lower()
    assert client.usage_today()["calls"] == 1


def test_a_cli_that_is_not_logged_in_leaves_the_local_path(claude_bin, home, db) -> None:
    (home / ".claude" / "settings.json").write_text("{}")
    client = cli_client(db, claude_bin)
    assert client.route.name == "local"
    assert client.unavailable_reason().endswith("not logged in (run `claude` and /login)")
    with pytest.raises(LLMUnavailable):
        client.complete("s", "p")


def test_the_budget_holds_on_the_cli_route(claude_bin, home, fake_api, db) -> None:
    client = cli_client(db, claude_bin, llm_daily_token_budget=500)
    with pytest.raises(LLMUnavailable, match="only 500"):
        client.complete("s", "p", max_tokens=1000)
    assert fake_api.messages() == []


# --- input tokens per call: CLI against SDK ---------------------------------------------


def routine_batch() -> list[dict]:
    """Eight tool uses of an ordinary session, as the pipeline batches them."""
    outputs = ["....................... [100%]\n42 passed in 3.1s", "M src/shop/discount.py\n?? notes.txt",
               "src/shop/cart.py:12: def apply_discount(cart, code):", "", "Already up to date.",
               "diff --git a/src/shop/discount.py b/src/shop/discount.py\n-    return price * 0.9\n+    return price * 0.85",
               "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'STRIPE_KEY'", "ok"]  # fmt: skip
    return [tool_use_event("s1", n, output=out) for n, out in enumerate(outputs)]


def test_cli_input_tokens_per_call_are_within_1_5x_of_the_sdk(claude_bin, home, fake_api, db, capsys) -> None:
    """The same calls through both routes; the fake counts input tokens the same way for both
    (a quarter of the characters of system + messages + tools, JSON as sent)."""
    batch = routine_batch()
    session_prompts = ["why does the discount test fail?", "fix it and run the tests", "commit the fix"]
    last_message = ("Root cause: apply_discount used 0.9 instead of the 15% rate. Fixed and tested (42 passed). "
                    "Next: read STRIPE_KEY from the environment; add a test for expired codes.")  # fmt: skip
    summary = prompts.summary_prompt(session_prompts, [compress_tool_use(p) for p in batch], last_message)
    calls = {
        "observations (8 tool uses)": (prompts.OBSERVATION_SYSTEM, prompts.observations_prompt(batch), 2000),
        "session summary (3 prompts, 8 observations)": (prompts.SUMMARY_SYSTEM, summary, 1200),
    }
    sdk = ClaudeClient(Settings(), db, api_key=HELPER_KEY, base_url=fake_api.base_url)
    cli = cli_client(db, claude_bin)
    assert (sdk.route.name, cli.route.name) == ("api", "cli")
    ratios, overheads = {}, {}
    for name, (system, prompt, max_tokens) in calls.items():
        spent = {}
        for route, client in (("sdk", sdk), ("cli", cli)):
            fake_api.enqueue(json_reply({"ok": True}))
            spent[route] = client.complete(system, prompt, max_tokens).input_tokens
        assert len(fake_api.messages()) == 2 * (len(ratios) + 1)  # one request per call on either route
        ratios[name] = spent["cli"] / spent["sdk"]
        overheads[name] = spent["cli"] - spent["sdk"]
        with capsys.disabled():
            print(f"\ninput tokens per call, {name}: SDK {spent['sdk']}, CLI {spent['cli']} "
                  f"({ratios[name]:.2f}x)")  # fmt: skip
    # What the CLI adds is a fixed cost a call, whatever the prompt: a billing line, one line of
    # Claude Code's system prompt, block wrappers and its reminders (the date; since 2.x.3xx also
    # an Environment section of ~200 tokens, the model and the token budget): ~180 tokens on
    # 2.1.197, ~400 on 2.1.332, which no flag removes beside our own --system-prompt. Fixed means
    # the same for both calls; within 1.5x on a batch of tool uses, the bulk of all calls.
    assert max(overheads.values()) - min(overheads.values()) <= 10, overheads
    assert all(extra <= 450 for extra in overheads.values()), overheads
    assert ratios["observations (8 tool uses)"] <= 1.5, ratios
