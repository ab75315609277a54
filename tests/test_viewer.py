"""The web viewer against a real worker: page, assets, token → cookie exchange, safe rendering."""

from __future__ import annotations

import getpass
import json
import http.client
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, RunningWorker

STATIC = ROOT / "memory_anchor" / "worker" / "static"


def fetch(worker: RunningWorker, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """One GET without following redirects and without the bearer header."""
    conn = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def test_page_and_assets_are_served_without_a_token(shared_worker):
    page = fetch(shared_worker, "/")
    assert page.status == 200
    assert page.getheader("Content-Type").startswith("text/html")
    html = page.body.decode()
    assert '<script src="/static/viewer.js"' in html and "/static/viewer.css" in html
    # Offline: nothing is loaded from another origin.
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    csp = page.getheader("Content-Security-Policy")
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.getheader("Set-Cookie") is None

    for name, media in (("viewer.js", "javascript"), ("viewer.css", "text/css")):
        asset = fetch(shared_worker, f"/static/{name}")
        assert asset.status == 200, name
        assert media in asset.getheader("Content-Type")
        assert asset.body == (STATIC / name).read_bytes()
        assert not re.search(rb"https?://", asset.body), f"{name} must not fetch from the network"
    assert fetch(shared_worker, "/static/../app.py").status in (403, 404)
    assert fetch(shared_worker, "/static/nothing.js").status == 404


def test_token_in_the_url_becomes_an_httponly_strict_cookie(shared_worker):
    wrong = fetch(shared_worker, "/?token=not-the-token")
    assert wrong.status == 401
    assert wrong.getheader("Set-Cookie") is None
    assert b'"invalid_token"' in wrong.body

    right = fetch(shared_worker, f"/?token={shared_worker.token}")
    assert right.status == 303
    assert right.getheader("Location") == "/"
    cookie = right.getheader("Set-Cookie")
    assert cookie.startswith(f"memory_anchor_token={shared_worker.token};")
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert "httponly" in attributes and "samesite=strict" in attributes and "path=/" in attributes


def test_the_cookie_authenticates_api_calls(shared_worker):
    body = shared_worker.post("/api/v1/memories", {"content": "cookie-visible memory", "infer": False, "user_id": "viewer"})
    memory_id = body["results"][0]["id"]
    cookie = {"Cookie": f"memory_anchor_token={shared_worker.token}"}

    assert fetch(shared_worker, f"/api/v1/memories/{memory_id}").status == 401
    assert fetch(shared_worker, f"/api/v1/memories/{memory_id}", {"Cookie": "memory_anchor_token=forged"}).status == 401
    ok = fetch(shared_worker, f"/api/v1/memories/{memory_id}", cookie)
    assert ok.status == 200 and b"cookie-visible memory" in ok.body
    history = fetch(shared_worker, f"/api/v1/memories/{memory_id}/history", cookie)
    assert history.status == 200
    assert fetch(shared_worker, "/api/v1/timeline?limit=5", cookie).status == 200


def test_the_viewer_never_turns_data_into_markup():
    """Memory text is untrusted: the script builds the page from text nodes only."""
    source = (STATIC / "viewer.js").read_text()
    code = re.sub(r"//[^\n]*", "", source)  # the header comment names what is forbidden
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc"):
        assert sink not in code, f"viewer.js uses {sink}"
    # el()/append() are the one way content reaches the page: strings become text nodes.
    assert "document.createTextNode(String(child))" in code
    assert not re.search(r"setAttribute\(\s*[\"']on", code), "no event handler attributes from data"


def test_openapi_lists_the_viewer_and_portability_routes(shared_worker):
    paths = shared_worker.get("/api/v1/openapi.json")["paths"]
    assert {"/", "/api/v1/export", "/api/v1/import", "/api/v1/admin/reindex"} <= set(paths)
    assert not any(path.startswith("/static") for path in paths)


def test_cli_prints_the_viewer_url(shared_worker):
    done = subprocess.run(
        [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(shared_worker.data_dir), "viewer"],
        cwd=ROOT, env=shared_worker.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    assert url == f"http://127.0.0.1:{shared_worker.port}/?token={shared_worker.token}"
    assert fetch(shared_worker, url.split(str(shared_worker.port), 1)[1]).status == 303


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = (
    "Debian's chromium is not installed: the viewer's browser tests are skipped "
    "(`apt-get install chromium`; .ci/run installs it in CI)"
)


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_hostile_memory_text_renders_as_text_in_a_browser(shared_worker, tmp_path: Path):
    """A real browser opens the printed URL, gets the cookie, runs the app: the payload stays text."""
    from tests.browser import Browser

    payload = '<img src=x id="pwned" onerror="document.title=\'pwned\'"><b id="bold">hostile</b>'
    shared_worker.post("/api/v1/memories", {"content": payload, "infer": False, "user_id": "viewer"})
    with Browser(CHROMIUM, tmp_path / "profile") as browser:
        browser.open(f"{shared_worker.url}/?token={shared_worker.token}")
        browser.wait_for("document.body.textContent.includes('hostile')")  # the timeline rendered the memory...
        dom = browser.evaluate("document.documentElement.outerHTML")
        title = browser.evaluate("document.title")
        made = browser.evaluate("!!document.getElementById('pwned') || !!document.getElementById('bold')")
    assert "&lt;img src=x" in dom  # ...as escaped text
    assert "<img" not in dom and '<b id="bold">' not in dom and not made  # no element was made from it
    assert title == "Memory Anchor"


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_decisions_are_clicked_through_in_a_browser(shared_worker, tmp_path: Path):
    """A person approves, rejects and resolves with the viewer's buttons; the worker records each decision."""
    from tests.browser import Browser

    project = "/tmp/viewer-decisions"
    agent = {"X-Memory-Anchor-Agent": "claude-code"}
    identity = shared_worker.post(
        "/api/v1/identity/proposals",
        {"action": "add", "content": "Constraint: no network at run time", "reason": "stated twice", "project": project},
        expect=202, headers=agent,
    )  # fmt: skip
    fact = shared_worker.post("/api/v1/facts", {"text": "We might shard the queue", "confidence": 0.8,
                                                "project": f"{project}/facts"}, expect=201)  # fmt: skip
    # Both sides of a fork write the same subject; an auto merge without Claude leaves the conflict open.
    shared_worker.post("/api/v1/branches", {"name": "viewer-exp"}, expect=201)
    subject = {"subject": "queue backend", "confidence": 0.95, "project": project}
    shared_worker.post("/api/v1/facts", {"text": "The queue backend is Redis", **subject}, expect=201)
    shared_worker.post("/api/v1/facts", {"text": "The queue backend is RabbitMQ", **subject}, expect=201,
                       headers={"X-Memory-Anchor-Branch": "viewer-exp"})  # fmt: skip
    shared_worker.post("/api/v1/branches/viewer-exp/merge", {"target": "main", "strategy": "auto"})
    conflicts = shared_worker.get(f"/api/v1/conflicts?project={project}")["results"]
    assert len(conflicts) == 1

    with Browser(CHROMIUM, tmp_path / "profile") as browser:
        browser.open(f"{shared_worker.url}/?token={shared_worker.token}")  # sets the cookie
        browser.open(f"{shared_worker.url}/?project={project}#approvals")
        browser.click_button("Approve")
        browser.wait_for("document.body.textContent.includes('approved')")
        assert len(browser.dialogs) == 3  # the identity layer's three confirmations, one by one

        browser.open(f"{shared_worker.url}/?project={project}/facts#approvals")
        browser.click_button("Reject")
        browser.wait_for("document.body.textContent.includes('rejected')")

        browser.open(f"{shared_worker.url}/?project={project}#conflicts")
        browser.click_button("Keep new")
        browser.wait_for("document.body.textContent.includes('resolved')")

    approvals = {a["id"]: a for a in shared_worker.get("/api/v1/approvals?status=approved")["results"]}
    assert approvals[identity["approval_id"]]["decided_by"] == f"human:{getpass.getuser()}"  # the worker's owner
    assert "Constraint: no network at run time" in [
        i["text"] for i in shared_worker.get(f"/api/v1/identity?project={project}")["results"]
    ]
    rejected = [a["id"] for a in shared_worker.get("/api/v1/approvals?status=rejected")["results"]]
    assert fact["approval_id"] in rejected
    resolved = shared_worker.get(f"/api/v1/conflicts?project={project}&status=resolved")["results"]
    assert [(c["id"], c["resolution"]) for c in resolved] == [(conflicts[0]["id"], "keep_new")]


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_rules_facts_and_next_steps_are_forgotten_and_edited_in_a_browser(shared_worker, tmp_path: Path):
    """A button beside each rule, fact and open next step: forget or edit it; it leaves the briefing
    and stays out when the same prompt and the same last message are posted again."""
    from tests.browser import Browser

    project = "/tmp/viewer-corrections"

    def session(session_id: str) -> None:
        for payload in (
            {**prompt_event(session_id, "Never import memory_anchor.worker.api from memory_anchor.worker.store."), "cwd": project},
            {**prompt_event(session_id, "I prefer dataclasses over namedtuples."), "cwd": project},
            {**prompt_event(session_id, "tidy up the store package"), "cwd": project, "hook_event_name": "Stop",
             "stop_hook_active": False, "last_assistant_message": "Tidied the store package.\n\nNext steps:\n"
             "- add a migration test for 0103\n- document the store layers"},
        ):  # fmt: skip
            shared_worker.post("/api/v1/events", payload, expect=202)
        shared_worker.wait_idle()

    session("viewer-c1")
    briefing = shared_worker.get(f"/api/v1/context?project={project}")["context"]
    assert "Never import memory_anchor.worker.api" in briefing and "add a migration test for 0103" in briefing
    with Browser(CHROMIUM, tmp_path / "profile") as browser:
        browser.open(f"{shared_worker.url}/?token={shared_worker.token}")
        browser.open(f"{shared_worker.url}/?project={project}#facts")
        browser.wait_for("document.body.textContent.includes('document the store layers')")
        browser.wait_for("document.body.textContent.includes('Never import memory_anchor.worker.api')")

        shown = "document.getElementById('section').textContent.includes({})".format
        for forget, (edit, new_text) in (("Never import memory_anchor.worker.api", ("I prefer dataclasses", "I prefer frozen dataclasses")),
                                         ("add a migration test for 0103", ("document the store layers",
                                          "document the store layers in docs/architecture.md"))):  # fmt: skip
            browser.click_button("Forget", near=forget)  # a fact, then a next step
            browser.wait_for("!" + shown(json.dumps(forget)))
            browser.click_button("Edit", near=edit)
            browser.wait_for("!!document.querySelector('textarea.edit-text')")
            browser.evaluate(f"document.querySelector('textarea.edit-text').value = {json.dumps(new_text)}; true")
            browser.click_button("Save")
            browser.wait_for(shown(json.dumps(new_text)))
        assert len(browser.dialogs) == 2 and all(d.startswith("Forget this") for d in browser.dialogs)

    gone = ("Never import memory_anchor.worker.api", "I prefer dataclasses over namedtuples", "add a migration test",
            "- document the store layers (step")  # fmt: skip
    briefing = shared_worker.get(f"/api/v1/context?project={project}")["context"]
    assert not [text for text in gone if text in briefing]
    assert "preference: I prefer frozen dataclasses" in briefing
    assert "- document the store layers in docs/architecture.md (step" in briefing
    session("viewer-c2")  # the same prompts and the same last message, as a re-import would post them
    briefing = shared_worker.get(f"/api/v1/context?project={project}")["context"]
    assert not [text for text in gone if text in briefing]
    assert "preference: I prefer frozen dataclasses" in briefing
    entries = shared_worker.get(f"/api/v1/forgotten?project={project}")["results"]
    assert sorted((e["kind"], e["action"]) for e in entries) == [
        ("fact", "edit"), ("fact", "forget"), ("next_step", "edit"), ("next_step", "forget")]
    assert {e["actor"] for e in entries} == {f"human:{getpass.getuser()}"}


def prompt_event(session_id: str, prompt: str) -> dict:
    return {
        "session_id": session_id, "transcript_path": f"/tmp/.claude/projects/x/{session_id}.jsonl",
        "cwd": "/tmp/viewer-live", "hook_event_name": "UserPromptSubmit", "prompt": prompt,
    }  # fmt: skip


def read_events(response, until: str, limit: int = 200) -> list[dict]:
    """Server-sent `record` events from `response` until one's data contains `until`."""
    found, block = [], []
    for _ in range(10_000):
        line = response.readline().decode().rstrip("\n")
        if line:
            block.append(line)
            continue
        fields = dict(item.split(": ", 1) for item in block if ": " in item and not item.startswith(":"))
        block = []
        if fields.get("event") == "record":
            record = json.loads(fields["data"])
            assert fields["id"] == str(record["seq"])
            found.append(record)
            if until in fields["data"] or len(found) >= limit:
                return found
    raise AssertionError(f"{until!r} never arrived; got {found}")


def test_the_timeline_streams_new_records_as_server_sent_events(shared_worker):
    conn = http.client.HTTPConnection("127.0.0.1", shared_worker.port, timeout=60)
    conn.request("GET", "/api/v1/timeline/stream?project=/tmp/viewer-live",
                 headers={"Authorization": f"Bearer {shared_worker.token}", "Accept": "text/event-stream"})  # fmt: skip
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/event-stream")
    assert response.readline() == b"retry: 1000\n"  # the stream is open before anything is written

    shared_worker.post("/api/v1/events", prompt_event("live-sse", "first streamed prompt"), expect=202)
    shared_worker.post("/api/v1/events", prompt_event("live-sse", "second streamed prompt"), expect=202)
    records = read_events(response, "second streamed prompt")
    assert [r["memory"] for r in records] == ["first streamed prompt", "second streamed prompt"]
    assert records[0]["seq"] < records[1]["seq"] and records[0]["kind"] == "prompt"
    conn.close()

    # Resuming after a seq replays what came later, as EventSource does with Last-Event-ID.
    conn = http.client.HTTPConnection("127.0.0.1", shared_worker.port, timeout=60)
    conn.request("GET", "/api/v1/timeline/stream?project=/tmp/viewer-live",
                 headers={"Authorization": f"Bearer {shared_worker.token}", "Last-Event-ID": str(records[0]["seq"]),
                          "Accept": "text/event-stream"})  # fmt: skip
    replayed = read_events(conn.getresponse(), "second streamed prompt")
    assert [r["memory"] for r in replayed] == ["second streamed prompt"]
    conn.close()
    assert shared_worker.request("GET", "/api/v1/timeline/stream", token=None)[0] == 401
    # Without `Accept: text/event-stream`: one JSON page, and where to resume.
    page = shared_worker.get(f"/api/v1/timeline/stream?project=/tmp/viewer-live&after={records[0]['seq']}")
    assert [r["memory"] for r in page["results"]] == ["second streamed prompt"]
    assert page["last_seq"] == records[1]["seq"]


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_timeline_updates_live_in_a_browser(shared_worker, tmp_path: Path):
    """Records captured while the viewer is open appear on the page without a reload."""
    from tests.browser import Browser

    project = "/tmp/viewer-live-browser"
    shared_worker.post("/api/v1/events", {**prompt_event("live-b", "already there before the page"), "cwd": project},
                       expect=202)  # fmt: skip
    shared_worker.wait_idle()
    with Browser(CHROMIUM, tmp_path / "profile") as browser:
        browser.open(f"{shared_worker.url}/?token={shared_worker.token}")
        browser.open(f"{shared_worker.url}/?project={project}#timeline")
        browser.wait_for("document.body.textContent.includes('already there before the page')")
        browser.wait_for("document.body.dataset.live === 'yes'")  # the stream is open (its flash fades after 6 s)
        browser.evaluate("window.loadedOnce = 'yes'")  # gone if the page reloads

        shared_worker.post("/api/v1/events", {**prompt_event("live-b", "typed while the viewer was open"), "cwd": project},
                           expect=202)  # fmt: skip
        browser.wait_for("document.body.textContent.includes('typed while the viewer was open')")
        memory = {"content": "remembered through the API while watching", "infer": False, "user_id": "viewer",
                  "metadata": {"project": project}}  # fmt: skip
        shared_worker.post("/api/v1/memories", {**memory, "project": project})
        shared_worker.post("/api/v1/events", {**prompt_event("live-b", "and one more prompt"), "cwd": project}, expect=202)
        browser.wait_for("document.body.textContent.includes('and one more prompt')")
        # A write that does not pass through the pipeline shows up too (the stream also looks each second).
        browser.wait_for("document.body.textContent.includes('remembered through the API while watching')")

        assert browser.evaluate("window.loadedOnce") == "yes"
        headlines = browser.evaluate("[...document.querySelectorAll('li.record .headline')].map((n) => n.textContent)")
        assert "and one more prompt" in headlines[:2]  # newest first (the API memory may land just before it)
        assert headlines.count("typed while the viewer was open") == 1
        assert browser.evaluate("document.querySelectorAll('li.record.fresh').length") >= 2


def test_an_open_stream_does_not_hold_up_the_worker_stopping(worker):
    conn = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=60)
    conn.request("GET", "/api/v1/timeline/stream", headers={"Authorization": f"Bearer {worker.token}", "Accept": "text/event-stream"})
    response = conn.getresponse()
    assert response.readline() == b"retry: 1000\n"
    assert worker.stop() == 0  # SIGTERM, and a clean exit (not the SIGKILL stop() falls back to)
    rest = response.read()  # the stream ends with the worker
    assert b"event: record" not in rest
    conn.close()


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_a_memory_whose_file_is_gone_wears_a_badge_in_a_browser(shared_worker, tmp_path: Path):
    """Issue 27: the timeline shows, on the card of a memory about code, what happened to its file since."""
    from memory_anchor.bench.gitrepo import GitRepo
    from tests.browser import Browser

    repo = GitRepo(tmp_path / "shop")
    files = {"config/settings.toml": "tax_rate = 0.2\n", "README.md": "# Shop\nRun make.\n"}
    repo.commit("Start", files=files)
    root = str(repo.root.resolve())
    for n, (path, content) in enumerate(files.items()):
        full = f"{root}/{path}"
        shared_worker.post("/api/v1/events", {
            "session_id": "s-viewer-code", "transcript_path": "/tmp/.claude/projects/x/s-viewer-code.jsonl",
            "cwd": root, "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": f"toolu_viewer_code_{n}",
            "tool_input": {"file_path": full}, "tool_response": {"type": "text", "file": {"filePath": full, "content": content}},
        }, expect=202)  # fmt: skip
    shared_worker.wait_idle()
    repo.commit("Settings move into pyproject", files={"config/settings.toml": None})

    with Browser(CHROMIUM, tmp_path / "profile") as browser:
        browser.open(f"{shared_worker.url}/?token={shared_worker.token}")
        browser.open(f"{shared_worker.url}/?project={root}#timeline")
        browser.wait_for("document.querySelectorAll('.badge.stale').length > 0")
        cards = browser.evaluate(
            "[...document.querySelectorAll('li.card.record')].map(c => [c.querySelector('.headline').textContent, "
            "[...c.querySelectorAll('.badge.stale')].map(b => b.textContent)])"
        )  # fmt: skip
    marks = {("settings" if "settings.toml" in headline else "readme"): badges for headline, badges in cards}
    assert marks == {"settings": ["config/settings.toml deleted since"], "readme": []}
