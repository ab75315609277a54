"""Files Claude changes through Bash are the session's changed files (real CLI, issue 25).

Agents very often write files with shell commands instead of Edit and Write. Here the scripted
model writes a plan with a heredoc whose body holds shell-looking lines, and fixes app/cart.py
with `cd app && sed -i`. The real Claude Code runs both in its real Bash tool and posts them
through the hooks; the next briefing's line for the session names the two files, placed where
the commands ran, and nothing the heredoc's text only mentions. It runs on the newest pinned CLI
only: the Bash payload every supported version sends is the same (tests/fixtures/transcripts).
"""

from __future__ import annotations


import pytest

from memory_anchor.client.worker_client import WorkerClient
from memory_anchor.core import paths
from tests.e2e.harness import machine_with_git_project, wait_for
from tests.fakes.anthropic_server import last_user_prompt, text_reply, tool_use_reply, trailing_tool_results

pytestmark = pytest.mark.e2e

CART = "def total(items):\n    return sum(item.price for item in items)\n"
PROMPT = "The cart total ignores quantities: plan the fix in notes/plan.md, then fix app/cart.py"
PLAN = ("mkdir -p notes && cat > notes/plan.md <<'EOF'\n# Plan\nMultiply by quantity; then\n"
        "rm -f app/legacy.py\necho done > app/status.txt\nEOF")  # fmt: skip
FIX = "cd app && sed -i 's/item.price for/item.price * item.quantity for/' cart.py"


class ShellModel:
    """Writes the plan and the fix with Bash, then says it is done; anything else gets a short answer."""

    def __call__(self, request):
        if not request.get("tools"):
            return text_reply("Cart fix")
        if PROMPT in last_user_prompt(request):
            step = trailing_tool_results(request)
            if step == 0:
                return tool_use_reply("Bash", {"command": PLAN, "description": "Write the plan"})
            if step == 1:
                return tool_use_reply("Bash", {"command": FIX, "description": "Fix the total"})
            return text_reply("Fixed the cart total in app/cart.py: each price is multiplied by its quantity.")
        return text_reply("OK.")


@pytest.fixture
def home(tmp_path):
    files = {"app/cart.py": CART, "app/legacy.py": "OLD = True\n"}
    with machine_with_git_project(tmp_path, ShellModel(), files, "the cart") as machine:
        yield machine


def test_files_written_through_bash_are_the_sessions_changed_files(home):
    home.run(PROMPT)
    # Claude Code's Bash tool did it: the plan exists, the fix is in, the heredoc's lines ran as no command
    assert "price * item.quantity" in (home.project / "app" / "cart.py").read_text()
    assert (home.project / "notes" / "plan.md").read_text().startswith("# Plan")
    assert (home.project / "app" / "legacy.py").exists() and not (home.project / "app" / "status.txt").exists()
    client = WorkerClient(home.plugin_data(), autostart=False)

    def session_line():
        text = client.get("/api/v1/context", project=str(home.project), source="startup")["context"]
        return next((line for line in text.splitlines() if "changed: " in line), None)

    def changed(line: str) -> set[str]:
        return set(line.split("changed: ", 1)[1].split(" · ")[0].split(", "))

    # On a loaded machine a hook may give up waiting for the worker and spool its event: the worker
    # takes it on its next pass, after the Stop that wrote the line, and the SessionEnd rewrites the
    # line with it. What the user sees once the session has ended is what counts.
    expected = {"notes/plan.md", "app/cart.py"}
    try:
        wait_for(lambda: (line := session_line()) and changed(line) == expected, 90,
                 message="the session's outcome in the briefing")  # fmt: skip
    except AssertionError:
        log = home.plugin_data() / paths.LOGS / paths.HOOKS_LOG
        raise AssertionError(f"{session_line()}\nhooks.log:\n{log.read_text() if log.exists() else '(none)'}") from None
