"""A forked Claude Code session writes to its own memory branch; its parent's memory stays as it was.

With each pinned CLI, as a user does it: session 1 runs the marker command;
`claude -p --resume S1 --fork-session` runs the fork's own command. The two CLIs
tell the hooks about a fork differently (tests/fixtures/forks,
memory_anchor/hookkit/forks.py), which is why this runs on both. Then a plain
`--resume` of each and a `--continue` show that the fork's next briefing has
what the fork did, the parent's has not, and that neither opens another branch.
"""

from __future__ import annotations

import json
import sys

import pytest

from memory_anchor.client.worker_client import WorkerClient
from tests.e2e.harness import RUN_MARKER, ClaudeCli, ClaudeHome, ScriptedModel, wait_for
from tests.e2e.test_claude_code import main_requests, plugin_root, session_one_observation, stop_worker  # noqa: F401
from tests.fakes.anthropic_server import FakeAnthropicServer, last_user_prompt, text_reply, tool_use_reply, trailing_tool_results

pytestmark = pytest.mark.e2e
FORK_PROMPT = "try another approach in the fork"
RECALL_PROMPT = "what did we do so far?"


class ForkingModel(ScriptedModel):
    """Session 1 prints the marker; the fork prints FORK-<marker>."""

    def __call__(self, request):
        if request.get("tools") and FORK_PROMPT in last_user_prompt(request):
            if trailing_tool_results(request) == 0:
                return tool_use_reply("Bash", {"command": f"echo FORK-{self.marker}", "description": "The fork's way"})
            return text_reply("The fork tried another approach.")
        return super().__call__(request)


@pytest.fixture
def fake_api(marker):
    with FakeAnthropicServer(responder=ForkingModel(marker)) as server:
        yield server


@pytest.fixture
def marker() -> str:
    import uuid

    return f"MARKER-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def machine(tmp_path, claude_cli: ClaudeCli, plugin_root, fake_api):  # noqa: F811
    home = ClaudeHome(tmp_path, fake_api.base_url, developer_python=sys.executable, claude=claude_cli.path)
    home.install_plugin(plugin_root)
    yield home
    stop_worker(home)


def session_id_of(home: ClaudeHome, *args: str) -> str:
    """`claude -p [flags...] <prompt>`: the session id it printed."""
    *flags, prompt = args
    return json.loads(home.run(prompt, *flags, "--output-format", "json").stdout)["session_id"]


def observation_commands(client: WorkerClient, branch: str) -> set[str]:
    found = client.get("/api/v1/observations", branch=branch, limit=100)["results"]
    return {obs.get("data", {}).get("command") for obs in found}


def first_request_after(fake_api, since: int) -> str:
    return json.dumps(main_requests(fake_api, since)[0])


def test_a_fork_writes_to_its_own_branch_and_leaves_the_parents_memory_alone(machine, fake_api, marker, claude_cli):
    parent = session_id_of(machine, RUN_MARKER)
    client, _ = session_one_observation(machine, marker)

    fork = session_id_of(machine, "--resume", parent, "--fork-session", FORK_PROMPT)
    assert fork != parent
    wait_for(lambda: f"echo FORK-{marker}" in observation_commands(client, f"fork/{fork}"), 60,
             message="the fork's tool use on its branch")  # fmt: skip
    assert client.get(f"/api/v1/sessions/{fork}/branch") == {"session_id": fork, "branch": f"fork/{fork}", "chosen_by": "fork"}
    assert client.get(f"/api/v1/branches/fork/{fork}")["parent"] == "main"
    # Session 1's memory is on the fork's branch too (it started from it); the fork's is not on main.
    assert f"echo {marker}" in observation_commands(client, f"fork/{fork}")
    assert f"echo FORK-{marker}" not in observation_commands(client, "main")
    assert client.get(f"/api/v1/sessions/{parent}/branch")["branch"] == "main"

    # The next briefing of each, as Claude Code sends it to the model: the fork's has the fork's work.
    since = len(fake_api.messages())
    assert session_id_of(machine, "--resume", fork, RECALL_PROMPT) == fork
    assert f"FORK-{marker}" in first_request_after(fake_api, since)
    since = len(fake_api.messages())
    assert session_id_of(machine, "--resume", parent, RECALL_PROMPT) == parent
    assert f"FORK-{marker}" not in first_request_after(fake_api, since)

    # --continue picks up the project's latest session, on the branch it already had.
    latest = session_id_of(machine, "--continue", RECALL_PROMPT)
    assert latest in (parent, fork)
    assert client.get(f"/api/v1/sessions/{latest}/branch")["branch"] == ("main" if latest == parent else f"fork/{fork}")
    branches = {b["name"] for b in client.get("/api/v1/branches")["results"]}
    assert branches == {"main", f"fork/{fork}"}, f"{claude_cli}: {branches}"
