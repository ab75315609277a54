"""Local (no LLM) compression: one observation per tool use, robust to any payload."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_anchor.schemas.observations import SUMMARY_MAX_CHARS, TYPE_TO_LAYER, ObservationDraft
from memory_anchor.worker.pipeline.compress import local


def payload(tool_name, tool_input, tool_response, **extra):
    return {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/repo",
        "hook_event_name": "PostToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_response": tool_response,
        "tool_use_id": "toolu_01",
        **extra,
    }


def test_bash_test_failure_is_a_discovery_with_failing_tests() -> None:
    out = (
        "..F.\n=================== FAILURES ===================\n"
        "FAILED tests/test_cart.py::test_coupon_twice - AssertionError: 90 != 80\n"
        "1 failed, 3 passed in 0.21s"
    )
    draft = local.compress_tool_use(
        payload("Bash", {"command": "cd /repo && python -m pytest tests/test_cart.py -q", "description": "Run tests"},
                {"stdout": out, "stderr": "", "interrupted": False})  # fmt: skip
    )
    assert draft.type == "discovery" and draft.layer == "event_log"
    assert draft.outcome == "error"
    assert "1 failed" in draft.title and "pytest" in draft.title
    assert "AssertionError" in draft.summary
    assert "Failing test: tests/test_cart.py::test_coupon_twice" in draft.facts
    assert draft.files_read == ["tests/test_cart.py"]
    assert draft.command == "cd /repo && python -m pytest tests/test_cart.py -q"
    assert draft.tool_use_id == "toolu_01" and draft.tool_name == "Bash"
    assert "testing" in draft.concepts and "python" in draft.concepts


def test_a_test_run_that_names_a_failing_test_without_a_count_failed() -> None:
    """`pytest -x` stopped at the first failure; the output has its FAILED line and no summary."""
    draft = local.compress_tool_use(
        payload("Bash", {"command": "pytest tests/test_login.py -x"},
                {"stdout": "FAILED test_login_expiry - AssertionError: token expired", "stderr": "", "interrupted": False})  # fmt: skip
    )
    assert draft.type == "discovery" and draft.outcome == "error"
    assert draft.title == "Ran tests `pytest tests/test_login.py -x`: failed"
    assert "Failing test: test_login_expiry" in draft.facts


def test_bash_passing_tests_are_an_event() -> None:
    draft = local.compress_tool_use(
        payload("Bash", {"command": "npm test"}, {"stdout": "Tests: 12 passed, 12 total", "stderr": "", "interrupted": False})
    )
    assert draft.type == "event" and draft.outcome == "ok" and "12 passed" in draft.title


def test_bash_exit_code_and_interruption() -> None:
    failed = local.compress_tool_use(
        payload("Bash", {"command": "make build"}, "Error: Exit code 2\nmake: *** [build] Error 2")
    )
    assert failed.outcome == "error" and failed.exit_code == 2
    assert any("exited with code 2" in f for f in failed.facts)
    assert failed.type == "discovery"
    stopped = local.compress_tool_use(
        payload("Bash", {"command": "sleep 100"}, {"stdout": "", "stderr": "", "interrupted": True})
    )
    assert stopped.outcome == "interrupted" and "interrupted" in stopped.title


def test_bash_git_commit_records_the_message() -> None:
    draft = local.compress_tool_use(
        payload("Bash", {"command": "git add -A && git commit -m 'Fix coupon applied twice'"},
                {"stdout": "[main 1a2b3c] Fix coupon applied twice\n 1 file changed", "stderr": "", "interrupted": False})  # fmt: skip
    )
    assert "Committed: Fix coupon applied twice" in draft.facts
    assert "git" in draft.concepts


@pytest.mark.parametrize("command, kind", [
    ('grep -rn "<<<<<<< HEAD\\|>>>>>>> main" services/ 2>&1 | head', "discovery"),  # quoted '>' and 2>&1 write nothing
    ("cd /repo && grep -n test Makefile 2>/dev/null | head -20", "discovery"),
    ("go build ./services/... 2>&1", "event"),
    ("echo 'ready' > status.txt", "change"),
    ("cat > notes.md <<'EOF'\nthe plan\nEOF", "change"),
    ("mkdir -p build/out", "change"),
    ("npm install left-pad", "change"),
    ("git commit -m \"$(cat <<'EOF'\nFix the cart total\nEOF\n)\"", "change"),  # the repository's state changed
])  # fmt: skip
def test_a_command_is_a_change_only_when_it_writes_or_installs(command, kind) -> None:
    """A change is work done: a session's summary lists the changes' titles as what it completed."""
    draft = local.compress_tool_use(payload("Bash", {"command": command, "description": "Step"}, {"stdout": "", "stderr": ""}))
    assert draft.type == kind


@pytest.mark.parametrize(
    "command,read,modified",
    [
        ("cat README.md src/app.py | head -5", ["README.md", "src/app.py"], []),
        ("sed -i 's/old/new/g' src/config.py", [], ["src/config.py"]),
        ("grep -rn 'def main' src/cli.py lib/util.py", ["src/cli.py", "lib/util.py"], []),
        ("echo hi > out/log.txt 2>/dev/null && cat < input.json", ["input.json"], ["out/log.txt"]),
        ("mv old_name.py new_name.py; cp a.txt backup/a.txt", ["a.txt"], ["new_name.py", "old_name.py", "backup/a.txt"]),
        ("FOO=1 sudo tee /etc/app.conf", [], ["/etc/app.conf"]),
        ("python3 scripts/migrate.py --dry-run", ["scripts/migrate.py"], []),
        ("git rm docs/old.md", [], ["docs/old.md"]),
        ("ls -la && echo 'unterminated", [], []),
        ("curl https://example.com/file.json -o /tmp/x", [], ["/tmp/x"]),
    ],
)
def test_files_parsed_from_commands(command: str, read: list[str], modified: list[str]) -> None:
    got_read, got_modified = local.files_in_command(command)
    assert got_read == read
    assert sorted(got_modified) == sorted(modified)


def test_read_tool() -> None:
    draft = local.compress_tool_use(
        payload("Read", {"file_path": "/repo/app/cart.py", "offset": 10, "limit": 20},
                {"type": "text", "file": {"filePath": "/repo/app/cart.py", "content": "def apply_coupon(cart):\n    pass\n",
                                          "numLines": 2, "startLine": 10, "totalLines": 80}})  # fmt: skip
    )
    assert draft.type == "discovery"
    assert draft.title == "Read /repo/app/cart.py (lines 10–29)"
    assert "2 lines of 80" in draft.summary and "def apply_coupon" in draft.summary
    assert draft.files_read == ["/repo/app/cart.py"] and draft.files_modified == []


def test_edit_with_fix_words_is_a_bugfix_with_a_diff() -> None:
    draft = local.compress_tool_use(
        payload("Edit", {"file_path": "/repo/app/cart.py", "old_string": "    total = a - b",
                         "new_string": "    # fix: discount was subtracted twice\n    total = a"},
                {"filePath": "/repo/app/cart.py"})  # fmt: skip
    )
    assert draft.type == "bugfix" and draft.layer == "verified_fact"
    assert draft.files_modified == ["/repo/app/cart.py"]
    assert "-    total = a - b" in draft.narrative and "+    total = a" in draft.narrative


def test_edit_types_refactor_and_change() -> None:
    renamed = local.compress_tool_use(
        payload("Edit", {"file_path": "a.py", "old_string": "x = compute()", "new_string": "# renamed helper\nx = compute_total()"}, {})
    )
    assert renamed.type == "refactor"
    reformatted = local.compress_tool_use(payload("Edit", {"file_path": "a.py", "old_string": "f(a,b)", "new_string": "f(a, b)"}, {}))
    assert reformatted.type == "refactor"
    plain = local.compress_tool_use(payload("Edit", {"file_path": "a.py", "old_string": "TIMEOUT = 5", "new_string": "TIMEOUT = 10"}, {}))
    assert plain.type == "change" and plain.layer == "event_log"


def test_multiedit_and_write() -> None:
    multi = local.compress_tool_use(
        payload("MultiEdit", {"file_path": "/r/x.ts", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d"}]}, {})
    )
    assert multi.title == "Edited /r/x.ts (2 edits)" and multi.files_modified == ["/r/x.ts"]
    assert "typescript" in multi.concepts
    created = local.compress_tool_use(
        payload("Write", {"file_path": "/r/new.py", "content": "import os\n\nprint(os.getcwd())\n"}, {"type": "create", "filePath": "/r/new.py"})
    )
    assert created.type == "feature" and created.title == "Created /r/new.py" and "3 lines" in created.summary


REFUSED = ("Error: The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
           "file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell "
           "you how to proceed.")  # fmt: skip  (what Claude Code records for an edit the user refused)


def test_an_edit_the_user_refused_or_that_failed_changed_nothing() -> None:
    refused = local.compress_tool_use(payload("Write", {"file_path": "/r/lib/mkSystem.nix", "content": "{ inputs }:\n{}\n"}, REFUSED))
    assert (refused.title, refused.type, refused.outcome) == ("Did not change /r/lib/mkSystem.nix", "discovery", "error")
    assert refused.summary.endswith("the user refused the change") and refused.files_modified == []
    missed = local.compress_tool_use(payload("Edit", {"file_path": "/r/a.py", "old_string": "x = 1", "new_string": "x = 2"},
                                             "<tool_use_error>String to replace not found in file.</tool_use_error>"))  # fmt: skip
    assert missed.title == "Did not change /r/a.py" and missed.files_modified == [] and not missed.facts
    assert "String to replace not found" in missed.summary
    made = local.compress_tool_use(payload("Edit", {"file_path": "/r/b.py", "old_string": "y = 1", "new_string": "y = 2"},
                                           {"filePath": "/r/b.py"}))  # fmt: skip
    # The session's line names the file it changed, not the one it was refused.
    summary = local.summarize_session(["tidy the helpers"], [refused, missed, made], "Done.")
    assert summary.files_changed == ["/r/b.py"]


def test_search_tools() -> None:
    grep = local.compress_tool_use(
        payload("Grep", {"pattern": "apply_coupon", "path": "/repo/app"},
                {"mode": "files_with_matches", "filenames": ["/repo/app/cart.py", "/repo/app/api.py"], "numFiles": 2})  # fmt: skip
    )
    assert grep.type == "discovery" and "2 files match" in grep.summary and "/repo/app/cart.py" in grep.summary
    glob = local.compress_tool_use(payload("Glob", {"pattern": "**/*.py"}, {"filenames": ["a.py", "b.py"], "numFiles": 2, "truncated": False}))
    assert glob.summary.startswith("2 files match")


def test_web_task_todo_mcp_and_unknown_tools() -> None:
    fetched = local.compress_tool_use(
        payload("WebFetch", {"url": "https://docs.python.org/3/library/re.html", "prompt": "flags?"},
                {"code": 200, "result": "re.DOTALL makes . match newlines.", "bytes": 1000})  # fmt: skip
    )
    assert fetched.title == "Fetched docs.python.org/3/library/re.html" and "DOTALL" in fetched.summary
    task = local.compress_tool_use(
        payload("Task", {"description": "Find coupon code", "prompt": "...", "subagent_type": "Explore"},
                {"content": [{"type": "text", "text": "Coupons are applied in app/cart.py:apply_coupon."}], "totalTokens": 900})  # fmt: skip
    )
    assert task.title == "Subagent (Explore): Find coupon code" and "app/cart.py" in task.summary
    todo = local.compress_tool_use(
        payload("TodoWrite", {"todos": [{"content": "Fix cart", "status": "completed", "activeForm": "Fixing"},
                                        {"content": "Add test", "status": "in_progress", "activeForm": "Adding"},
                                        {"content": "Update docs", "status": "pending", "activeForm": "Updating"}]},
                {"oldTodos": [], "newTodos": []})  # fmt: skip
    )
    assert todo.type == "note" and "3 items, 1 done" in todo.title and todo.summary == "Working on: Add test"
    assert "[pending] Update docs" in todo.facts
    mcp = local.compress_tool_use(
        payload("mcp__plugin_memory-anchor_memory__search", {"query": "coupon"}, [{"type": "text", "text": "2 memories found"}])
    )
    assert mcp.type == "discovery" and mcp.summary == "2 memories found" and "mcp" in mcp.concepts
    other = local.compress_tool_use(payload("FancyNewTool", {"x": 1}, {"result": "did the thing"}))
    assert other.type == "event" and other.title == "Used FancyNewTool" and other.summary == "did the thing"


def test_error_response_makes_a_discovery() -> None:
    draft = local.compress_tool_use(payload("Read", {"file_path": "/nope.py"}, "Error: File does not exist."))
    assert draft.outcome == "error"


def test_summary_length_is_bounded_even_for_huge_outputs() -> None:
    huge = "x" * 50_000 + "\nerror: " + "y" * 5000
    draft = local.compress_tool_use(payload("Bash", {"command": "build " + "z" * 5000}, {"stdout": huge, "stderr": ""}))
    assert len(draft.summary) <= SUMMARY_MAX_CHARS and len(draft.title) <= 120
    assert len(draft.narrative) < 3000


def test_type_to_layer_covers_every_type() -> None:
    assert set(TYPE_TO_LAYER) == set(ObservationDraft.model_fields["type"].annotation.__args__)
    assert {t for t, layer in TYPE_TO_LAYER.items() if layer == "verified_fact"} >= {"decision", "bugfix", "refactor"}
    assert {t for t, layer in TYPE_TO_LAYER.items() if layer == "event_log"} >= {"event", "discovery", "note"}


def test_schema_validates_summary_length_and_accepts_seed_aliases() -> None:
    with pytest.raises(ValueError):
        ObservationDraft(title="t", summary="s" * 201)
    draft = ObservationDraft.model_validate({"title": "t", "summary": "s", "details": "d", "tags": ["x"], "files": ["f.py"]})
    assert draft.narrative == "d" and draft.concepts == ["x"] and draft.files_modified == ["f.py"]


def test_session_summary_from_prompts_and_observations() -> None:
    drafts = [
        local.compress_tool_use(payload("Read", {"file_path": "app/cart.py"}, {"file": {"content": "x"}})),
        local.compress_tool_use(payload("Bash", {"command": "pytest -q"}, {"stdout": "FAILED tests/test_cart.py::test_x\n1 failed", "stderr": ""})),
        local.compress_tool_use(payload("Edit", {"file_path": "app/cart.py", "old_string": "a", "new_string": "# fix twice\nb"}, {})),
        local.compress_tool_use(payload("TodoWrite", {"todos": [{"content": "Write changelog", "status": "pending"}]}, {})),
        local.compress_tool_use(payload("Bash", {"command": "npm install left-pad", "description": "Install left-pad"},
                                        {"stdout": "added 1 package", "stderr": ""})),  # fmt: skip
    ]
    stored = {"kind": "observation", "title": "Created docs/coupons.md", "text": "Created docs/coupons.md",
              "type": "feature", "data": {"files_modified": ["docs/coupons.md"], "summary": "Created docs"}}  # fmt: skip
    summary = local.summarize_session(
        ["Fix the coupon bug", "also add docs"], [*drafts, stored, "garbage", None],
        "Fixed it. Next: release 1.2 after review.",
    )
    assert summary.request.startswith("Fix the coupon bug") and "also add docs" in summary.request
    assert "Read app/cart.py" in summary.investigated
    assert "Failing test: tests/test_cart.py::test_x" in summary.learned
    # what was completed besides the files it lists as changed (an edit's title would only repeat them)
    assert "Install left-pad" in summary.completed
    assert "Edited app/cart.py" not in summary.completed and "Created docs/coupons.md" not in summary.completed
    # A todo item is the agent's working plan, not work the session left: never a next step.
    assert summary.next == ["release 1.2 after review"] and "Write changelog" not in summary.text
    assert summary.files_changed == ["app/cart.py", "docs/coupons.md"] and summary.files[:2] == summary.files_changed
    assert summary.tests == ["`pytest -q`: 1 failed"]
    assert summary.text.startswith("Request: Fix the coupon bug") and summary.distilled_by == "local"


def test_a_plan_claude_code_wrote_in_plan_mode_is_no_change_to_the_project() -> None:
    plan = "/Users/ann/.claude/plans/ok-never-mind-wondrous-pascal.md"
    drafts = [
        local.compress_tool_use(payload("Write", {"file_path": plan, "content": "# Plan\n1. move expiry into storage"}, {})),
        local.compress_tool_use(payload("Edit", {"file_path": "internal/storage/storage.go", "old_string": "a", "new_string": "b"}, {})),
        local.compress_tool_use(payload("Write", {"file_path": "C:\\Users\\ann\\.claude\\plans\\swirling.md", "content": "x"}, {})),
    ]
    summary = local.summarize_session(["move the expiry logic into the storage layer"], drafts, "Done.")
    assert summary.files_changed == ["internal/storage/storage.go"]
    assert plan in summary.files  # touched all the same: Claude may open it


def test_a_request_of_a_word_or_two_does_not_lead_the_sessions_line() -> None:
    """A resumed session of brain's history opens with "continue": its line leads with what was asked next."""
    summary = local.summarize_session(["continue", "do some analysis of the project and useage to create agents"], [])
    assert summary.request == "do some analysis of the project and useage to create agents | then: continue"
    assert local.summarize_session(["yes please", "ok"], []).request == "yes please | then: ok"  # none says more
    assert local.summarize_session(["继续", "帮我全自动配置插件"], []).request.startswith("帮我全自动配置插件")
    assert local.summarize_session(["/catchup", "go on"], []).request == "/catchup | then: go on"


def test_a_session_line_says_what_was_asked_and_what_came_of_it() -> None:
    """A pasted issue is asked by its title; the tests the session turned around and the files it changed are its result."""
    issue = ("We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
             "Migrations uses value of enum object instead of its name.\nDescription\n\t\nWhen using Enum objects as a "
             "default value for a CharField, the generated migration file uses the value of the Enum object instead of "
             "its name.\n\nINSTRUCTION:\nNever change the tests.")  # fmt: skip
    run = lambda out, code: local.compress_tool_use(payload("Bash", {"command": "python -m pytest tests/migrations -q"},  # noqa: E731
                                                            {"stdout": out, "stderr": "", "exit_code": code}))  # fmt: skip
    drafts = [
        run("F.\nFAILED tests/migrations/test_writer.py::test_enum - AssertionError\n1 failed, 1 passed", 1),
        local.compress_tool_use(payload("Edit", {"file_path": "django/db/migrations/serializer.py", "old_string": "v.value",
                                                 "new_string": "v.name"}, {})),  # fmt: skip
        run("..\n2 passed in 0.3s", 0),
    ]
    summary = local.summarize_session([issue], drafts, "The Programmer has made the necessary edits. The next step is "
                                      "to have the Tester verify if the issue has indeed been resolved.")  # fmt: skip
    assert summary.request == "Migrations uses value of enum object instead of its name."
    assert summary.files_changed == ["django/db/migrations/serializer.py"]
    assert summary.tests == ["`python -m pytest tests/migrations -q`: 2 passed (failed before)"]
    assert summary.next == [] and summary.root_causes == []  # the agents' plan and narration are not an outcome


def test_session_summary_of_nothing() -> None:
    summary = local.summarize_session([], [], None)
    assert summary.text == "Session with no recorded activity"


# --- fuzzing: no payload shape may make compression raise ----------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)
TOOLS = ["Bash", "Read", "Edit", "MultiEdit", "Write", "Grep", "Glob", "WebFetch", "WebSearch", "Task",
         "TodoWrite", "NotebookEdit", "mcp__srv__get_thing", "mcp__", "Unknown", ""]  # fmt: skip
KEYS = ["command", "description", "file_path", "old_string", "new_string", "edits", "content", "pattern", "path",
        "url", "prompt", "todos", "stdout", "stderr", "interrupted", "file", "filenames", "numFiles", "code", "result",
        "type", "offset", "limit", "exit_code", "status", "notebook_path"]  # fmt: skip
shaped = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tool=st.sampled_from(TOOLS) | st.text(max_size=20) | json_values,
    tool_input=shaped | json_values,
    response=shaped | json_values | st.lists(shaped, max_size=3),
)
def test_fuzzed_payloads_never_raise(tool, tool_input, response) -> None:
    # build_observation (not the guarded entry point) so that a crash is a test failure
    draft = local.build_observation({"tool_name": tool, "tool_input": tool_input, "tool_response": response})
    assert isinstance(draft, ObservationDraft) and draft.title and draft.summary


@settings(max_examples=100, deadline=None)
@given(value=json_values)
def test_fuzzed_top_level_values_never_raise(value) -> None:
    assert isinstance(local.build_observation(value), ObservationDraft)
    assert local.summarize_session([value], [value], value).text


@settings(max_examples=100, deadline=None)
@given(command=st.text(max_size=200))
def test_fuzzed_commands_never_raise(command: str) -> None:
    read, modified = local.files_in_command(command)
    assert all(isinstance(p, str) and p for p in read + modified)
