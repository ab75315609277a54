"""Memory that knows when it is stale (issue 27), through a real worker on both backends.

A git project made here with the real `git` goes through sessions posted at the hook event
door (the payloads Claude Code sends: Edit, Read, a prompt, Stop); then commits outside any
session delete a file, rewrite the fixed function and move a document. The next briefing and
recall mark what no longer holds, leave the rest as it was, and the rule about the deleted
file shows demoted until the file is back; the git watch records it (the briefing only reads).
"""

from __future__ import annotations

import json
import shutil
import urllib.parse

import pytest

from tests.conftest import ROOT, start_worker, wait_for, worker_env
from tests.gitrepo import GitRepo

pytestmark = [pytest.mark.both_backends, pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]

CART = "def total(items):\n    return sum(item.price for item in items)\n"
FIXED_LINE = "return sum(item.price * item.quantity for item in items)"
SETTINGS = "[database]\nurl = 'postgresql://localhost/shop'\npool_size = 5\n"
GUIDE = "# Shop guide\n\nHow orders flow from the cart to the invoice.\n" * 3


def hook(cwd, session: str, name: str, **fields) -> dict:
    """A hook payload as Claude Code sends it (../shared/docs/claude-code-e2e.md)."""
    return {"session_id": session, "transcript_path": f"/tmp/.claude/projects/x/{session}.jsonl", "cwd": str(cwd),
            "hook_event_name": name, **fields}  # fmt: skip


def edit(cwd, session: str, n: int, path: str, old: str, new: str, original: str) -> dict:
    return hook(cwd, session, "PostToolUse", tool_name="Edit", tool_use_id=f"toolu_{session}_{n}",
                tool_input={"file_path": str(cwd / path), "old_string": old, "new_string": new, "replace_all": False},
                tool_response={"filePath": str(cwd / path), "oldString": old, "newString": new,
                               "originalFile": original, "structuredPatch": [], "userModified": False})  # fmt: skip


def read(cwd, session: str, n: int, path: str) -> dict:
    content = (cwd / path).read_text()
    return hook(cwd, session, "PostToolUse", tool_name="Read", tool_use_id=f"toolu_{session}_{n}",
                tool_input={"file_path": str(cwd / path)},
                tool_response={"type": "text", "file": {"filePath": str(cwd / path), "content": content,
                               "numLines": content.count("\n"), "startLine": 1, "totalLines": content.count("\n")}})  # fmt: skip


def prompt(cwd, session: str, text: str) -> dict:
    return hook(cwd, session, "UserPromptSubmit", prompt=text, permission_mode="default")


def stop(cwd, session: str, message: str) -> dict:
    return hook(cwd, session, "Stop", stop_hook_active=False, last_assistant_message=message)


def post(worker, *events: dict) -> None:
    for payload in events:
        worker.post("/api/v1/events", payload, expect=202)
    worker.wait_idle()


def briefing(worker, project) -> str:
    return worker.get(f"/api/v1/context?project={urllib.parse.quote(str(project))}")["context"]


def line_with(text: str, words: str) -> str:
    return next(line for line in text.splitlines() if words in line)


def three_sessions(worker, repo: GitRepo) -> None:
    """The issue's new user: a fix with a next step, a rule about where the settings live, a guide read."""
    root = repo.root
    repo.write("app/cart.py", CART)
    repo.write("app/invoice.py", "def invoice(items):\n    return [item.price for item in items]\n")
    repo.write("config/settings.toml", SETTINGS)
    repo.write("docs/guide.md", GUIDE)
    repo.commit("the shop")

    repo.write("app/cart.py", CART.replace("return sum(item.price for item in items)", FIXED_LINE))
    post(worker,
         prompt(root, "s1", "The cart total ignores the quantity of each item, fix it"),
         edit(root, "s1", 1, "app/cart.py", "return sum(item.price for item in items)", FIXED_LINE, CART),
         stop(root, "s1", "Fixed the cart total in app/cart.py.\n\nRoot cause: total() summed prices without the "
                          "quantity.\n\nNext step: make app/invoice.py use the quantity too."))  # fmt: skip
    post(worker,
         prompt(root, "s2", "Always keep the database settings in config/settings.toml from now on."),
         read(root, "s2", 1, "config/settings.toml"),
         stop(root, "s2", "The database settings are in config/settings.toml; I will keep them there."))  # fmt: skip
    post(worker,
         prompt(root, "s3", "Where is the guide about how orders flow?"),
         read(root, "s3", 1, "docs/guide.md"),
         stop(root, "s3", "The guide is docs/guide.md: it explains how orders flow from the cart to the invoice."))  # fmt: skip


def rule_fact(worker, project) -> dict:
    facts = worker.get(f"/api/v1/facts?project={urllib.parse.quote(str(project))}&status=active")["results"]
    return next(f for f in facts if "config/settings.toml" in f["text"])


def test_the_briefing_and_recall_mark_what_commits_made_stale_and_nothing_else(shared_worker, tmp_path):
    repo = GitRepo(tmp_path / "shop")
    project = repo.root.resolve()
    three_sessions(shared_worker, repo)

    before = briefing(shared_worker, project)
    for marked in ("changed since", "deleted since", "moved to", "superseded", "needs verification"):
        assert marked not in before, before
    rule = rule_fact(shared_worker, project)
    assert [r["path"] for r in rule["data"]["code"]] == ["config/settings.toml"]
    confidence = rule["confidence"]

    # Commits outside any session: the settings file goes (its content elsewhere), the fix is
    # rewritten, the guide moves, and a file nobody remembered changes.
    repo.git("rm", "-q", "config/settings.toml")
    repo.write("pyproject.toml", "[project]\nname = 'shop'\nversion = '2.0'\n")
    repo.commit("settings move to the environment")
    repo.write("app/cart.py", "def total(items):\n    return sum(map(line_total, items))\n")
    repo.commit("total through line_total")
    (repo.root / "handbook").mkdir()
    repo.git("mv", "docs/guide.md", "handbook/guide.md")
    repo.commit("docs become the handbook")
    repo.write("app/invoice.py", "def invoice(items):\n    return [item.price * item.quantity for item in items]\n")
    repo.commit("invoice uses the quantity")

    after = briefing(shared_worker, project)
    assert len(after) <= 10_000
    fix = line_with(after, "done: Fixed the cart total")  # a team database keeps what was asked private
    assert fix.endswith("(superseded: the edit to app/cart.py is no longer in the file)"), fix
    sessions = after.split("## Last sessions")[1].split("\n## ")[0].splitlines()[1:]
    assert sorted(line[line.rindex(" ("):] for line in sessions if line.endswith(")")) == [
        " (config/settings.toml deleted since)",  # the session that learned where the settings live
        " (docs/guide.md moved to handbook/guide.md)",  # the one that read the guide
        " (superseded: the edit to app/cart.py is no longer in the file)",
    ], after
    assert line_with(after, "config/settings.toml: 3 lines").endswith("(config/settings.toml deleted since)"), after
    assert line_with(after, "docs/guide.md: 9 lines").endswith("(docs/guide.md moved to handbook/guide.md)"), after
    assert line_with(after, "[change] Edited").endswith("(superseded: the edit to app/cart.py is no longer in the file)")
    assert line_with(after, "total() summed prices").endswith("(app/cart.py changed since, 2 commits)")  # the fix was committed with the first
    rule_line = line_with(after, "rule: Always keep the database settings")
    assert "[needs verification]" in rule_line and rule_line.endswith("(config/settings.toml deleted since)"), rule_line

    # The briefing only showed it; the git watch records the demotion (memory_anchor/worker/app.py).
    wait_for(lambda: rule_fact(shared_worker, project)["confidence"] < 0.6, timeout=30, what="the demotion recorded")
    demoted = rule_fact(shared_worker, project)
    assert demoted["confidence"] < 0.6 <= confidence and demoted["needs_verification"]

    recalled = shared_worker.post("/api/v1/recall", {"prompt": "how did we fix the cart total quantity bug?",
                                              "project": str(project), "session_id": "s4", "cwd": str(project)})["context"]  # fmt: skip
    assert "superseded: the edit to app/cart.py is no longer in the file" in recalled, recalled

    # The settings file comes back as it was: the code confirms the rule again.
    repo.write("config/settings.toml", SETTINGS)
    repo.commit("settings back")
    again = briefing(shared_worker, project)
    assert "needs verification" not in line_with(again, "rule: Always keep the database settings")
    wait_for(lambda: rule_fact(shared_worker, project)["confidence"] == confidence, timeout=30, what="the rule restored")
    restored = rule_fact(shared_worker, project)
    assert restored["confidence"] == confidence and not restored["needs_verification"]


def test_outside_git_nothing_is_marked_and_nothing_breaks(shared_worker, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "app").mkdir()
    (plain / "app/cart.py").write_text(CART.replace("return sum(item.price for item in items)", FIXED_LINE))
    post(shared_worker,
         prompt(plain, "p1", "The cart total ignores the quantity of each item, fix it"),
         edit(plain, "p1", 1, "app/cart.py", "return sum(item.price for item in items)", FIXED_LINE, CART),
         stop(plain, "p1", "Fixed the cart total in app/cart.py."))  # fmt: skip
    (plain / "app/cart.py").unlink()
    text = briefing(shared_worker, plain.resolve())
    assert "done: Fixed the cart total in app/cart.py" in text and "app/cart.py → `return" in text
    for marked in ("changed since", "deleted since", "superseded"):
        assert marked not in text


def test_without_git_on_the_path_nothing_is_marked(tmp_path):
    repo = GitRepo(tmp_path / "shop")
    repo.write("app/cart.py", CART)
    repo.commit("cart")
    data_dir = tmp_path / "data"
    bin_dir = tmp_path / "bin-without-git"
    bin_dir.mkdir()
    running = start_worker(data_dir, env=worker_env(data_dir, PATH=str(bin_dir)))
    try:
        root = repo.root
        repo.write("app/cart.py", CART.replace("return sum(item.price for item in items)", FIXED_LINE))
        post(running,
             prompt(root, "g1", "The cart total ignores the quantity of each item, fix it"),
             edit(root, "g1", 1, "app/cart.py", "return sum(item.price for item in items)", FIXED_LINE, CART),
             stop(root, "g1", "Fixed the cart total in app/cart.py."))  # fmt: skip
        repo.write("app/cart.py", "def total(items):\n    return 0\n")
        text = briefing(running, root.resolve())
        assert "done: Fixed the cart total in app/cart.py" in text and "superseded" not in text, text
    finally:
        running.stop()


def test_claude_codes_recorded_payloads_keep_the_files_as_each_tool_left_them(shared_worker, tmp_path):
    """The payloads the real CLI sent (tests/fixtures/transcripts/2.1.197: Write, Edit, Read of notes.txt)
    replayed in a git project, each file as the tool left it when its event is drained."""
    from memory_anchor.worker.codebase.git import blob_id

    recorded = [json.loads(line) for line in
                (ROOT / "tests/fixtures/transcripts/2.1.197/hooks-received.ndjson").read_text().splitlines()]  # fmt: skip
    repo = GitRepo(tmp_path / "my.project_x")
    repo.write("README.md", "the project\n")
    repo.commit("start")
    then = recorded[0]["cwd"]
    for payload in recorded:
        payload = json.loads(json.dumps(payload).replace(then, str(repo.root)))
        if payload["hook_event_name"] not in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"):
            continue
        tool, given = payload.get("tool_name"), payload.get("tool_input") or {}
        if tool == "Write":
            repo.write("notes.txt", given["content"])
        elif tool == "Edit":
            repo.write("notes.txt", payload["tool_response"]["originalFile"].replace(given["old_string"], given["new_string"]))
        post(shared_worker, payload)

    observations = shared_worker.get(f"/api/v1/observations?project={urllib.parse.quote(str(repo.root.resolve()))}&limit=50")["results"]
    kept = {o["data"]["tool_name"]: o["data"].get("code") for o in observations if o["data"].get("tool_name") in ("Write", "Edit", "Read")}
    head = repo.git("rev-parse", "HEAD").strip()
    assert kept == {
        "Write": [{"path": "notes.txt", "blob": blob_id(b"first note\n"), "head": head}],
        "Edit": [{"path": "notes.txt", "blob": blob_id(b"second note\n"), "head": head}],  # 'second note' is too short to find again
        "Read": [{"path": "notes.txt", "blob": blob_id(b"second note\n"), "head": head}],
    }
    text = briefing(shared_worker, repo.root.resolve())
    assert line_with(text, "[feature] Created").endswith("(notes.txt changed since, not committed)"), text
    assert "changed since" not in line_with(text, "[change] Edited") + line_with(text, "[discovery] Read"), text
