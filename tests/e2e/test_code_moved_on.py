"""A fix that a later commit replaced is briefed as superseded (real CLI, issue 27).

Session 1, in a git project, reads app/cart.py and fixes it with Claude Code's own Read and
Edit tools (the model's side is scripted by the fake Messages API). Then a commit outside any
session rewrites the fixed line. Session 2's first model request, as Claude Code sends it,
carries the briefing: the session that made the fix is marked superseded, and its edit too.
It runs on the newest pinned CLI only: what is checked is the worker's, given the Read and Edit
payloads every supported version sends alike (tests/fixtures/transcripts).
"""

from __future__ import annotations

import json

import pytest

from memory_anchor.client.worker_client import WorkerClient
from tests.e2e.harness import machine_with_git_project, wait_for
from tests.fakes.anthropic_server import last_user_prompt, text_reply, tool_use_reply, trailing_tool_results

pytestmark = pytest.mark.e2e

CART = "def total(items):\n    return sum(item.price for item in items)\n"
BROKEN = "    return sum(item.price for item in items)"
FIXED = "    return sum(item.price * item.quantity for item in items)"
FIX_PROMPT = "The cart total ignores the quantity of each item: fix app/cart.py"
MARK = "superseded: the edit to app/cart.py is no longer in the file"


class FixingModel:
    """Reads the file, edits the line, says what it did; anything else gets a short answer."""

    def __init__(self, cart_path: str):
        self.cart_path = cart_path

    def __call__(self, request):
        if not request.get("tools"):
            return text_reply("Cart fix")
        if FIX_PROMPT in last_user_prompt(request):
            step = trailing_tool_results(request)
            if step == 0:
                return tool_use_reply("Read", {"file_path": self.cart_path})
            if step == 1:
                return tool_use_reply("Edit", {"file_path": self.cart_path, "old_string": BROKEN, "new_string": FIXED})
            return text_reply("Fixed the cart total in app/cart.py: it now multiplies each price by its quantity.")
        return text_reply("OK.")


@pytest.fixture
def home(tmp_path):
    model = FixingModel(str(tmp_path / "project" / "app" / "cart.py"))
    with machine_with_git_project(tmp_path, model, {"app/cart.py": CART}, "the cart") as machine:
        yield machine


def test_a_fix_a_later_commit_replaced_is_briefed_as_superseded(home):
    home.run(FIX_PROMPT)
    assert FIXED in (home.project / "app" / "cart.py").read_text()  # Claude Code's Edit tool did it
    client = WorkerClient(home.plugin_data(), autostart=False)

    def briefed():
        text = client.get("/api/v1/context", project=str(home.project), source="startup")["context"]
        return text if "changed: app/cart.py" in text else None

    def drained():
        status = client.get("/api/v1/status")
        return not status["inbox"].get("pending") and not status["pending_vectors"]

    before = wait_for(briefed, 90, message="session 1's outcome in the briefing")
    # The session line can be briefed from the session's outcome before its summary is drained, and
    # a summary's refs are taken from the work tree when it is drained: the later commit comes after.
    wait_for(drained, 90, message="session 1's events all processed")
    assert not next(line for line in before.splitlines() if "changed: app/cart.py" in line).endswith(")"), before

    home.repo.commit("the fix")
    home.repo.write("app/cart.py", "def total(items):\n    return sum(map(line_total, items))\n")
    home.repo.commit("total through line_total")

    since = len(home.api.messages())
    home.run("What do you remember about this project?")
    first = json.dumps(next(m for m in home.api.messages()[since:] if m.get("tools")))
    session_line = next(line for line in first.split("\\n") if "changed: app/cart.py" in line)
    assert MARK in session_line, session_line
