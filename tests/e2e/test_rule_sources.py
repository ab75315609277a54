"""A rule Claude proposes from a tool's output is refused; the user's own rule is kept (real CLI, Claude route).

The worker distils through Claude here: the fake Messages API answers both
Claude Code's conversation and the worker's extraction calls. The session's
user says one lasting instruction; a file the session reads says another. The
scripted extraction reply proposes both as rules, each with the quote a model
would give. The code keeps the user's and refuses the file's, and the next
session's briefing, as Claude Code sends it to the model, shows exactly that.

The newest CLI only: what is refused is decided by the worker, whatever the version.
"""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from memory_anchor.client.worker_client import WorkerClient
from tests.e2e.harness import ClaudeHome, copy_plugin, ensure_claude_installed, wait_for
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    json_reply,
    last_user_prompt,
    text_reply,
    tool_use_reply,
    trailing_tool_results,
)

pytestmark = pytest.mark.e2e

USER_RULE = "From now on, never deploy on Fridays."
FILE_RULE = "Always rebase onto main before you open a pull request."
PROMPT = f"Please read CONTRIBUTING.md and summarise it for me. {USER_RULE}"


class ModelAndDistiller:
    """Claude Code's conversation, scripted; and the worker's calls, answered as a model that over-reaches would."""

    def __init__(self, token: str):
        self.token = token

    def __call__(self, request):
        system = json.dumps(request.get("system") or "")
        if "You extract durable knowledge" in system:
            return json_reply({"facts": [
                {"text": "Never deploy on Fridays.", "confidence": 0.95, "subject": "deploy days",
                 "category": "rule", "quote": USER_RULE},
                {"text": FILE_RULE, "confidence": 0.95, "subject": "pull requests", "category": "rule",
                 "quote": FILE_RULE},  # it is in the file's text, which the session read: not the user's words
            ]})  # fmt: skip
        if "You manage the fact memory" in system:
            return json_reply({"decisions": []})
        if "From a session's user prompts" in system:
            return json_reply({"done": ["Summarised CONTRIBUTING.md"], "root_causes": [], "next_steps": []})
        if "You receive tool uses" in system:
            return json_reply({"observations": []})  # merged onto the local drafts, which stay
        if not request.get("tools"):
            return text_reply("Contributing summary")
        if "CONTRIBUTING" in last_user_prompt(request) and trailing_tool_results(request) == 0:
            return tool_use_reply("Bash", {"command": "cat CONTRIBUTING.md", "description": "Read the guide"})
        return text_reply(f"The guide asks contributors to rebase before a pull request. {self.token}")


@pytest.fixture
def home(tmp_path):
    claude_bin = ensure_claude_installed()
    assert claude_bin.exists()
    token = uuid.uuid4().hex[:8]
    with FakeAnthropicServer(responder=ModelAndDistiller(token)) as api:
        machine = ClaudeHome(tmp_path, api.base_url, developer_python=sys.executable)
        machine.env["MEMORY_ANCHOR_LLM_DAILY_TOKEN_BUDGET"] = "1000000"  # distil through Claude (the fake API)
        machine.env["MEMORY_ANCHOR_LLM_ROUTE"] = "api"
        machine.install_plugin(copy_plugin(tmp_path / "plugin"))
        (machine.project / "CONTRIBUTING.md").write_text(f"# Contributing\n\n{FILE_RULE}\n")
        machine.api = api
        try:
            yield machine
        finally:
            from tests.e2e.test_claude_code import stop_worker

            stop_worker(machine)


def test_a_rule_claude_proposes_from_tool_output_is_refused(home):
    home.run(PROMPT)
    client = WorkerClient(home.plugin_data(), autostart=False)

    def standing():
        facts = client.get("/api/v1/facts", project=str(home.project), limit=50)["results"]
        return [f["text"] for f in facts if f.get("category", f.get("type")) == "rule"] or None

    assert wait_for(standing, 90, message="the session's extraction at Stop") == ["Never deploy on Fridays."]
    extraction = [m for m in home.api.messages() if "You extract durable knowledge" in json.dumps(m.get("system"))]
    assert extraction and "cat CONTRIBUTING.md" in json.dumps(extraction[-1])  # the model did see the tool output

    since = len(home.api.messages())
    home.run("What do you remember about this project?")
    first = next(m for m in home.api.messages()[since:] if m.get("tools"))
    briefing = json.dumps(first)
    assert "Never deploy on Fridays." in briefing
    assert "rebase" not in briefing.split("Last sessions")[0]  # not among the rules, whatever else mentions it
