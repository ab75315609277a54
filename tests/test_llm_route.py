"""Which route reaches Claude (API key, the user's Claude Code login, local), finding the
CLI, reading its results, the hard timeout and the hooks' guard against our own sessions.

The real CLI against the fake API is in tests/test_claude_cli.py; here the CLI's
inputs and outputs are given directly.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from memory_anchor.schemas.settings import Settings
from tests.test_hooks import base_payload, hook_env, run_hook, spool_lines
from memory_anchor.worker.llm import claude_cli
from memory_anchor.worker.llm.claude_cli import CliCallError, CliStatus, locate, parse_result
from memory_anchor.worker.llm.client import ClaudeClient, LLMError, LLMUnavailable
from memory_anchor.worker.llm.route import choose_route
from memory_anchor.worker.store.db import Database

REAL_LOCATE = locate  # tests/conftest.py hides the developer's CLI from other tests; these test the search itself
LOGGED_IN = CliStatus("/opt/claude/bin/claude", "PATH", version="2.1.197", logged_in=True, auth="claude.ai")
LOGGED_OUT = CliStatus("/opt/claude/bin/claude", "PATH", version="2.1.197", logged_in=False)


def route(env: dict[str, str], cli: CliStatus | None = LOGGED_IN, **settings):
    asked: list[str] = []

    def find_cli(configured: str) -> CliStatus | None:
        asked.append(configured)
        return cli

    return choose_route(Settings(**settings), env, find_cli), asked


def test_auto_prefers_the_api_key_and_does_not_look_for_the_cli() -> None:
    chosen, asked = route({"ANTHROPIC_API_KEY": "sk-ant-x"})
    assert (chosen.name, chosen.reason) == ("api", "ANTHROPIC_API_KEY is set")
    assert asked == []  # no `claude` process is started when the key decides


def test_auto_without_a_key_takes_the_claude_code_login() -> None:
    chosen, asked = route({"ANTHROPIC_API_KEY": "  "}, claude_cli_path="/somewhere/claude")
    assert chosen.name == "cli" and chosen.cli is LOGGED_IN
    assert chosen.describe() == (
        "cli: no ANTHROPIC_API_KEY; Claude Code CLI 2.1.197 at /opt/claude/bin/claude (PATH), logged in via claude.ai"
    )
    assert asked == ["/somewhere/claude"]


def test_auto_without_a_key_or_a_usable_cli_is_local_and_says_why() -> None:
    chosen, _ = route({}, cli=None)
    assert chosen.name == "local" and "no Claude Code CLI was found" in chosen.reason
    chosen, _ = route({}, cli=LOGGED_OUT)
    assert chosen.name == "local" and "not logged in (run `claude` and /login)" in chosen.reason
    broken = CliStatus("/x/claude", "the claude_cli_path setting", problem="no executable there")
    chosen, _ = route({}, cli=broken)
    assert chosen.describe() == "local: no ANTHROPIC_API_KEY; Claude Code CLI at /x/claude (the claude_cli_path setting): no executable there"


def test_an_explicit_route_wins() -> None:
    key = {"ANTHROPIC_API_KEY": "sk-ant-x"}
    assert route(key, llm_route="local")[0].name == "local"
    assert route(key, llm_route="cli")[0].describe().startswith("cli: llm_route is 'cli'; Claude Code CLI 2.1.197")
    assert route(key, llm_route="api")[0].name == "api"
    chosen, asked = route({}, llm_route="api")
    assert chosen.describe() == "local: llm_route is 'api' but no ANTHROPIC_API_KEY is set" and asked == []
    assert route({}, cli=LOGGED_OUT, llm_route="cli")[0].name == "local"


def test_an_unknown_route_is_a_settings_error() -> None:
    with pytest.raises(ValueError, match="llm_route"):
        Settings(llm_route="carrier-pigeon")


def test_a_cli_that_cannot_tell_its_login_is_tried() -> None:
    unknown = CliStatus("/opt/claude", "PATH", version="1.0.3", logged_in=None)
    chosen, _ = route({}, cli=unknown)
    assert chosen.name == "cli" and "login not checked" in chosen.reason


# --- finding the CLI ---------------------------------------------------------------------


def executable(path: Path, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_locate_finds_the_cli_on_path_then_in_claude_codes_install_places(tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    env = {"HOME": str(home), "PATH": str(bin_dir)}
    assert REAL_LOCATE("", env=env) is None or not REAL_LOCATE("", env=env)[0].startswith(str(tmp_path))

    native = executable(home / ".local" / "bin" / "claude")
    assert REAL_LOCATE("", env=env) == (str(native), "Claude Code's install place")
    on_path = executable(bin_dir / "claude")
    assert REAL_LOCATE("", env=env) == (str(on_path), "PATH")
    # A setting names it: taken as is, even over PATH.
    assert REAL_LOCATE("~/tools/claude", env=env)[1] == "the claude_cli_path setting"


def test_the_legacy_local_install_is_found(tmp_path: Path) -> None:
    home = tmp_path / "home"
    local = executable(home / ".claude" / "local" / "claude")
    assert REAL_LOCATE("", env={"HOME": str(home), "PATH": str(tmp_path / "empty")}) == (
        str(local), "Claude Code's install place",
    )  # fmt: skip


def test_inspect_reports_a_missing_executable(tmp_path: Path) -> None:
    status = claude_cli.inspect(str(tmp_path / "nope"), "the claude_cli_path setting")
    assert not status.usable and status.problem == "no executable there"


def test_the_spawned_environment_drops_the_parent_session_and_adds_the_guards() -> None:
    env = claude_cli.child_env({"PATH": "/bin", "CLAUDECODE": "1", "CLAUDE_PLUGIN_ROOT": "/p",
                                "CLAUDE_CODE_SESSION_ID": "abc", "CLAUDE_CODE_USE_BEDROCK": "1"})  # fmt: skip
    assert env["MEMORY_ANCHOR_SPAWNED"] == "1" and env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert env["CLAUDE_CODE_DISABLE_CLAUDE_MDS"] == "1" and env["CLAUDE_CODE_DISABLE_THINKING"] == "1"
    assert "CLAUDECODE" not in env and "CLAUDE_PLUGIN_ROOT" not in env and "CLAUDE_CODE_SESSION_ID" not in env
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "1"  # the user's login choice passes through


# --- reading `claude -p --output-format json` ----------------------------------------------


def result_line(**fields) -> str:
    base = {"type": "result", "subtype": "success", "is_error": False, "api_error_status": None, "result": "",
            "stop_reason": "end_turn", "usage": {}, "modelUsage": {}}  # fmt: skip
    return json.dumps({**base, **fields})


def test_a_result_gives_text_and_all_input_tokens() -> None:
    usage = {"input_tokens": 12, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 50, "output_tokens": 9}
    reply = parse_result(result_line(result='{"a": 1}', usage=usage, modelUsage={"claude-haiku-4-5": {}}), "", 0)
    assert (reply.text, reply.input_tokens, reply.output_tokens, reply.model) == ('{"a": 1}', 362, 9, "claude-haiku-4-5")


@pytest.mark.parametrize(
    "status,message,retryable,logged_out",
    [
        (429, "API Error: Request rejected (429) · rate limited", True, False),
        (529, "API Error: 529 overloaded", True, False),
        (500, "API Error: 500 boom", True, False),
        (400, "API Error: 400 bad request", False, False),
        (401, "Failed to authenticate. API Error: 401", False, False),
        (None, "API Error: Unable to connect to API (ConnectionRefused)", True, False),
        (None, "Not logged in · Please run /login", False, True),
    ],
)
def test_errors_say_whether_to_retry(status, message, retryable, logged_out) -> None:
    with pytest.raises(CliCallError) as caught:
        parse_result(result_line(is_error=True, api_error_status=status, result=message), "", 1)
    assert caught.value.retryable is retryable and caught.value.logged_out is logged_out
    assert message[:20] in str(caught.value)


def test_output_that_is_not_a_result_is_an_error_with_the_cli_s_words() -> None:
    with pytest.raises(CliCallError, match="exited 2 without a JSON result: error: unknown option"):
        parse_result("", "error: unknown option '--tools'\n", 2)


# --- the client on the CLI route, with stand-in executables --------------------------------


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "memory.sqlite3")
    yield database
    database.close()


def cli_client(db, path: Path, **settings) -> ClaudeClient:
    status = CliStatus(str(path), "the claude_cli_path setting", version="test", logged_in=True, auth="test")
    return ClaudeClient(Settings(**settings), db, api_key="", sleep=lambda s: None, find_cli=lambda configured: status)


def test_a_hung_cli_is_killed_with_everything_it_started(tmp_path: Path, db, monkeypatch) -> None:
    pid_file = tmp_path / "grandchild.pid"
    hung = executable(tmp_path / "claude", f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nwait\n")
    monkeypatch.setattr(claude_cli, "STARTUP_ALLOWANCE_SECONDS", 0.0)
    client = cli_client(db, hung, llm_timeout_seconds=1.0, llm_max_retries=0)
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert caught.value.retryable and "timed out" in str(caught.value)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the process group was not killed"
    assert client.usage_today()["calls"] == 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_logged_out_cli_sends_the_client_to_the_local_path_and_looks_again(tmp_path: Path, db) -> None:
    line = result_line(is_error=True, result="Not logged in · Please run /login")
    logged_out = executable(tmp_path / "claude", f"#!/bin/sh\ncat > /dev/null\necho '{line}'\nexit 1\n")
    client = cli_client(db, logged_out)
    assert client.route.name == "cli"
    with pytest.raises(LLMUnavailable, match="not logged in"):
        client.complete("s", "p")
    assert client._route is None  # the next call asks again which route to take


def test_calls_through_the_cli_share_the_budget_and_retries(tmp_path: Path, db) -> None:
    """A stand-in that fails once with a 529, then answers, reading the prompt from stdin."""
    count = tmp_path / "calls"
    ok = result_line(result='{"done": true}', usage={"input_tokens": 70, "output_tokens": 5})
    busy = result_line(is_error=True, api_error_status=529, result="API Error: 529 overloaded")
    script = (f"#!/bin/sh\ncat > {tmp_path}/prompt\necho x >> {count}\n"
              f"if [ $(wc -l < {count}) -lt 2 ]; then echo '{busy}'; exit 1; fi\necho '{ok}'\n")  # fmt: skip
    client = cli_client(db, executable(tmp_path / "claude", script), llm_max_retries=2)
    assert client.complete_json("sys", "the prompt") == {"done": True}
    assert (tmp_path / "prompt").read_text() == "the prompt"
    assert client.usage_today() == {"input_tokens": 70, "output_tokens": 5, "calls": 1}
    spent = Settings().llm_daily_token_budget - 75
    assert client.remaining_budget() == spent


def test_one_cli_call_at_a_time_whatever_the_thread(tmp_path: Path, db) -> None:
    """Parallel callers (pipeline, judge, extraction) never run two `claude` processes at once."""
    import threading

    ok = result_line(result='"fine"', usage={"input_tokens": 1, "output_tokens": 1})
    script = (f"#!/bin/sh\ncat > /dev/null\nmkdir {tmp_path}/running 2>/dev/null || touch {tmp_path}/overlap\n"
              f"sleep 0.3\nrmdir {tmp_path}/running\necho '{ok}'\n")  # fmt: skip
    client = cli_client(db, executable(tmp_path / "claude", script))
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(client.complete("s", "p").text)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == ['"fine"'] * 3
    assert not (tmp_path / "overlap").exists(), "two claude processes ran at once"


# --- the recursion guard in the hooks ------------------------------------------------------


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"])
def test_hooks_do_nothing_in_a_session_the_worker_spawned(tmp_path: Path, event) -> None:
    payload = base_payload(event, "spawned-session", str(tmp_path), prompt="compress these", tool_name="Bash")
    spawned = run_hook(event, payload, hook_env(tmp_path / "data", MEMORY_ANCHOR_SPAWNED="1"))
    assert spawned.returncode == 0 and spawned.stdout == b"" and spawned.stderr == b""
    assert not (tmp_path / "data").exists() or spool_lines(tmp_path / "data") == []

    # The same hook without the guard captures the event (spooled: no worker runs here).
    user = run_hook(event, payload, hook_env(tmp_path / "data2"))
    assert user.returncode == 0
    assert [line["payload"]["hook_event_name"] for line in spool_lines(tmp_path / "data2")] == [event]


# --- saying which route is active, and why ---------------------------------------------


def test_settings_command_says_which_route_a_worker_would_take(tmp_path: Path, monkeypatch, capsys) -> None:
    from memory_anchor.cli.main import main

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("MEMORY_ANCHOR_LLM_ROUTE", raising=False)
    assert main(["--data-dir", str(tmp_path), "settings"]) == 0
    out = capsys.readouterr().out
    assert "llm_route = 'auto'" in out and "claude_cli_path = ''" in out
    assert ("# Claude route (no worker running; as one started here would): local: no ANTHROPIC_API_KEY, "
            "and no Claude Code CLI was found") in out  # fmt: skip

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    assert main(["--data-dir", str(tmp_path), "--json", "settings"]) == 0
    route = json.loads(capsys.readouterr().out)["claude_route"]
    assert (route["route"], route["active"]) == ("api", "api: ANTHROPIC_API_KEY is set")


def test_status_and_settings_report_the_running_workers_route(worker, monkeypatch, capsys) -> None:
    """The worker's environment decides (tests/conftest.py runs it with llm_route=api and no key)."""
    from memory_anchor.cli.main import main

    llm = worker.get("/api/v1/status")["llm"]
    assert llm["route"] == "local" and llm["available"] is False
    assert llm["active"] == "local: llm_route is 'api' but no ANTHROPIC_API_KEY is set"
    assert llm["usage_today"] == {"input_tokens": 0, "output_tokens": 0, "calls": 0}

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-only-in-this-shell")
    assert main(["--data-dir", str(worker.data_dir), "settings"]) == 0
    assert "# Claude route (the running worker): local: llm_route is 'api' but no ANTHROPIC_API_KEY" in capsys.readouterr().out
