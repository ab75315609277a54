"""Claude's replies within a session are remembered: a few passages a turn, redacted, searchable.

Live capture reads the turn from the Stop's transcript; the history importer hands the turn's
texts over in the Stop it makes (`assistant_messages`).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from memory_anchor.worker.capture.history import session_events
from memory_anchor.worker.capture.replies import PER_TURN, passages
from memory_anchor.worker.capture.transcript import parse_entries, turn_texts

REASON = ("We chose SQLite over PostgreSQL for the local cache because the plugin must run on a laptop "
          "without a database server, and WAL mode gives us concurrent readers for the hooks.")  # fmt: skip
FAILED = ("The first attempt with inotify failed: the watcher missed renames made by editors that save "
          "through a temporary file, so we switched to polling the mtime every two seconds instead.")  # fmt: skip


def test_explanations_are_kept_and_narration_is_not() -> None:
    said = [
        "Let me look at the cache module first.",
        "Now I'll update the config:",
        REASON,
        "- [x] read the cache\n- [ ] update the config\n- [ ] run the tests",
        FAILED + "\n\n```python\nwatcher = Poller(interval=2)\n```",
    ]
    kept = passages(said)
    assert kept == [REASON, FAILED + "\n`watcher = Poller(interval=2)`"]


def test_a_short_code_block_stays_with_what_introduced_it_and_a_file_does_not() -> None:
    """How-to answers are mostly a command: "use --file" says nothing without it. A file Claude
    prints whole is the file's (its tool call keeps it), not a reply worth a passage."""
    howto = ("For a plain Nix file, not a flake, use `--file`:\n\n```bash\n# evaluate the file\n"
             "nix eval --file lib/hosts/default.nix\n```")  # fmt: skip
    [kept] = passages([howto])
    assert kept == ("For a plain Nix file, not a flake, use `--file`:\n`# evaluate the file`\n"
                    "`nix eval --file lib/hosts/default.nix`")  # fmt: skip
    module = "\n".join(f"  option{n} = true;" for n in range(30))
    printed = f"Here is the whole module as it stands now, after the rename we did together:\n\n```nix\n{{\n{module}\n}}\n```"
    assert passages([printed]) == []


def test_a_long_turn_keeps_a_few_of_its_most_informative_passages_in_order() -> None:
    filler = [f"Step {n}: the build of module number {n} went through its usual checks and nothing was out of "
              f"the ordinary in the logs we read." for n in range(12)]  # fmt: skip
    kept = passages([*filler, REASON])
    assert len(kept) == PER_TURN and REASON in kept
    order = [*filler, REASON]
    assert kept == sorted(kept, key=order.index)


def _entry(kind: str, text: str, n: int, **extra) -> dict:
    content = text if kind == "user" else [{"type": "text", "text": text}]
    return {"type": kind, "uuid": f"u{n}", "sessionId": "s1", "timestamp": f"2025-11-29T10:00:{n:02d}Z",
            "message": {"id": f"m{n}", "role": kind, "content": content}, **extra}  # fmt: skip


def test_the_turn_is_found_by_its_last_message_even_after_the_next_prompt() -> None:
    turns = parse_entries([
        _entry("user", "why is the cache local?", 1), _entry("assistant", REASON, 2),
        _entry("assistant", "Done: the cache stays local.", 3),
        _entry("user", "and the watcher?", 4), _entry("assistant", FAILED, 5),
    ])  # fmt: skip
    assert turn_texts(turns, "Done: the cache stays local.") == [REASON, "Done: the cache stays local."]
    assert turn_texts(turns, None) == [FAILED]
    # A Stop hook's feedback is Claude Code's text: it starts a turn but is no prompt.
    notice = parse_entries([_entry("user", "Stop hook feedback:\nPrompt hook condition was not met: docs", 1)])
    assert notice[0].role == "notice" and not notice[0].is_prompt


def test_the_importer_hands_each_turns_texts_to_its_stop(tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    lines = [_entry("user", "why is the cache local?", 1), _entry("assistant", REASON, 2),
             _entry("assistant", "Done.", 3), _entry("user", "and the watcher?", 4), _entry("assistant", FAILED, 5)]  # fmt: skip
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    stops = [e.payload for e in session_events(transcript) if e.payload["hook_event_name"] == "Stop"]
    assert [s["assistant_messages"] for s in stops] == [[REASON, "Done."], [FAILED]]
    assert [s["last_assistant_message"] for s in stops] == ["Done.", FAILED]


def test_a_live_stop_remembers_the_turns_replies_redacted_and_searchable(worker, tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "A" * 40
    transcript = tmp_path / "live.jsonl"
    said = f"{REASON} The key in .env ({secret}) stays out of the cache."
    lines = [_entry("user", "why is the cache local?", 1), _entry("assistant", said, 2),
             _entry("assistant", "Done: the cache stays local.", 3)]  # fmt: skip
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    base = {"session_id": "live-1", "cwd": str(tmp_path), "transcript_path": str(transcript)}
    worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "why is the cache local?"}, expect=202)
    worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                   "last_assistant_message": "Done: the cache stays local."}, expect=202)  # fmt: skip
    worker.wait_idle()
    found = worker.post("/api/v1/memories/search", {"query": "why not postgres for the laptop cache", "top_k": 5,
                                                    "filters": {"project": str(tmp_path)}})["results"]  # fmt: skip
    replies = [hit for hit in found if hit["kind"] == "transcript"]
    assert replies and replies[0]["type"] == "reply" and "WAL mode" in replies[0]["memory"]
    assert secret not in json.dumps(found) and "REDACTED" in replies[0]["memory"]
    assert replies[0]["title"] == "Re: why is the cache local?"  # the request it answers, found by its words too
    # The Stop again (a hook's retry, an import of the same turn) adds nothing twice.
    worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                   "last_assistant_message": "Done: the cache stays local."}, expect=202)  # fmt: skip
    worker.wait_idle()
    stored = worker.get(f"/api/v1/timeline?project={quote(str(tmp_path))}&limit=100")["results"]
    assert len([r for r in stored if r["kind"] == "transcript"]) == 1


def test_a_command_claude_showed_is_found_by_the_question_and_its_secret_is_not_stored(worker, tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "C" * 40
    transcript = tmp_path / "howto.jsonl"
    said = ("To run the importer against the staging copy, set the key in the shell first and point it at "
            f"the snapshot:\n\n```bash\nexport ANTHROPIC_API_KEY={secret}\n./bin/import --source snapshots/staging.db\n```")  # fmt: skip
    lines = [_entry("user", "how do I run the importer on staging?", 1), _entry("assistant", said, 2)]
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    base = {"session_id": "howto-1", "cwd": str(tmp_path), "transcript_path": str(transcript)}
    worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit",
                                   "prompt": "how do I run the importer on staging?"}, expect=202)  # fmt: skip
    worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                   "last_assistant_message": said}, expect=202)  # fmt: skip
    worker.wait_idle()
    found = worker.post("/api/v1/memories/search", {"query": "command to import the staging snapshot", "top_k": 5,
                                                    "filters": {"project": str(tmp_path), "kind": "transcript"}})["results"]  # fmt: skip
    assert found and "./bin/import --source snapshots/staging.db" in found[0]["memory"]
    assert secret not in json.dumps(found) and "REDACTED" in found[0]["memory"]


def test_the_passages_of_one_turn_are_each_found_under_the_request_they_answer(worker, tmp_path: Path) -> None:
    """A turn's passages share their title (the request): each is its own answer, none folded into another."""
    transcript = tmp_path / "turn.jsonl"
    ask = "why does the file watcher miss saves and why is the cache in sqlite?"
    said = [REASON, FAILED, "The cache file lives in the plugin's data directory, next to the logs, so that "
            "uninstalling the plugin removes it and two projects never share one cache between them."]  # fmt: skip
    lines = [_entry("user", ask, 1)] + [_entry("assistant", text, n) for n, text in enumerate(said, start=2)]
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    base = {"session_id": "turn-1", "cwd": str(tmp_path), "transcript_path": str(transcript)}
    worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit", "prompt": ask}, expect=202)
    worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                   "last_assistant_message": said[-1]}, expect=202)  # fmt: skip
    worker.wait_idle()
    found = worker.post("/api/v1/memories/search", {"query": "sqlite cache file watcher polling data directory",
                                                    "top_k": 10, "filters": {"project": str(tmp_path)}})["results"]  # fmt: skip
    replies = [hit for hit in found if hit["kind"] == "transcript"]
    assert len(replies) == 3 and {hit["title"] for hit in replies} == {f"Re: {ask}"}
    assert not any(hit.get("similar") for hit in replies)


def test_a_passage_answering_a_bare_yes_or_a_slash_command_is_titled_by_its_own_words(worker, tmp_path: Path) -> None:
    """"Re: yes" or "Re: /catchup" would say nothing of what the passage answers."""
    for n, ask in enumerate(["yes", "/catchup"]):
        transcript = tmp_path / f"bare-{n}.jsonl"
        transcript.write_text("\n".join(json.dumps(line) for line in [_entry("user", ask, 1), _entry("assistant", FAILED, 2)]) + "\n")
        base = {"session_id": f"bare-{n}", "cwd": str(tmp_path), "transcript_path": str(transcript)}
        worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit", "prompt": ask}, expect=202)
        worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                       "last_assistant_message": FAILED}, expect=202)  # fmt: skip
    worker.wait_idle()
    stored = worker.get(f"/api/v1/timeline?project={quote(str(tmp_path))}&limit=100")["results"]
    titles = [r["title"] for r in stored if r["kind"] == "transcript"]
    assert len(titles) == 2 and all(t.startswith("The first attempt with inotify failed") for t in titles), titles
