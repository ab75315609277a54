"""What memory keeps as a fact or an open step is a whole statement (memory_anchor/worker/memory/form.py),
read from Claude's last message by memory_anchor/worker/memory/outcomes.py whatever its layout."""

from __future__ import annotations

import pytest

from memory_anchor.worker.memory.form import fact_flaw, step_flaw
from memory_anchor.worker.memory.outcomes import session_outcome
from memory_anchor.worker.memory.provenance import check
from memory_anchor.worker.pipeline.compress import local


@pytest.mark.parametrize("text", [
    "the price was rounded before the rate was applied",
    "The problem is that `response.data` is `null`",
    "The cache key ignored the locale",
    "`load_config()` returns None when the file is empty",
    "We store the embeddings in `data/vectors.npz` because Chroma was too slow to start",
    "缓存的 TTL 设置成了 0",
    "我们的工厂在东莞，主要做婴儿纺织品",  # 我们 is "we"
    '配置里写的是 "我的模型"，不是 DeepSeek 的模型名',  # a quoted 我 is not the speaker
])  # fmt: skip
def test_whole_statements_are_facts(text):
    assert fact_flaw(text) is None


@pytest.mark.parametrize("text, why", [
    ("## Why this matters", "heading"),
    ("The migration is safe to run twice because:", "label"),
    ('"We picked Postgres because..."', "placeholder"),
    ("We picked Postgres because…", "placeholder"),
    ("| Worker | ❌ Not started |", "table"),
    ("Should we cache the tokens?", "question"),
    ('"The database is the source of truth."', "quotation"),
    ("The loader fails when `config.get(", "cut off"),
    ("The request times out because the", "cut off"),
    ("Your notes, organised", "verb"),
    ("Fast feedback for every change", "verb"),
    ("Search result preview", "verb"),
    ("Merge server's money_movements from backfill", "imperative"),
    ("Update the sync code so that it skips the rows the server sent", "imperative"),
    ("I've created a test file for `WebStoreUtilities.ts`: the tests are expected to fail", "people talking"),
    ("Let me check why the loader returns None", "people talking"),
    ("You've double-applied the changes", "people talking"),
    ("没有关键词数据，我说不出这个品为什么表现好", "people talking"),
])  # fmt: skip
def test_fragments_placeholders_and_taglines_are_no_facts(text, why):
    flaw = fact_flaw(text)
    assert flaw is not None and (why in flaw or why == "verb" and "finite verb" in flaw)


@pytest.mark.parametrize("text", [
    "add a regression test", "Update `docs/setup.md` with the new flag", "create missing.txt",
    "Wait for the nightly import to finish (watch `make status`)", "The schema still needs to be migrated",
    "给 Redis 加上监控", "补充退款流程的单元测试", "下一步：在预发环境压测缓存命中率", "首页加载还需要优化",
    "明天上线新的结算页", "Review 一下支付模块的 PR",
])  # fmt: skip
def test_work_left_to_do_is_a_step(text):
    assert step_flaw(text) is None


@pytest.mark.parametrize("text", [
    "Phase 2", "Milestone 3 (Reporting)", "Sprint 4: Billing", "## 📋 Remaining Work", "Still need to decide:",
    "Billing page: not yet started", "Rewrote the parser, tests not yet updated",
    "Want me to continue with the export, or stop here?", "| Exporter | 🔲 Not yet built |",
    # What Claude needs to know, and what it offers, are no work: "下一步：要更精准定位，需要了解：" then these.
    "产能和交货期", "现有认证（Oeko-Tex、CE等）", "后续可提供：完整17页版作为详细资料",
])  # fmt: skip
def test_names_statuses_headings_and_reports_are_no_steps(text):
    assert step_flaw(text) is not None


def test_a_markdown_section_of_work_left_gives_its_items_and_never_its_heading():
    message = """Cleanup finished.

## ✅ Completed
- Rewrote `README.md` (the old one promised a CLI we never built)

## 📋 Still To Do (Minimal)

**Quick (10 minutes):**
- Update `api/CLAUDE.md` with a limitations section
- Keep `web/CLAUDE.md` as it is (already good)

**Later:**
- Extract the hard-coded host from the client

## 🚀 Ready

```
- Remove this line: it is code, not a step
```
> Next steps: quoted from the old plan, not this session's

Everything else is documentation.
"""
    outcome = session_outcome(message)
    assert outcome.next_steps == ["Update `api/CLAUDE.md` with a limitations section",
                                  "Extract the hard-coded host from the client"]  # fmt: skip
    assert outcome.root_causes == []


def test_a_step_that_heads_its_own_how_to_is_one_step_and_a_label_of_a_group_is_none():
    message = """All modules upgraded.

## Next Steps:
1. **Test the Main Process feature**:
   - Go to Employees → Departments
   - Open a department → Main Processes tab
2. **Backend**:
   - add the migration for orders
   - write tests for the refund path
"""
    assert session_outcome(message).next_steps == [
        "Test the Main Process feature", "add the migration for orders", "write tests for the refund path"]


def test_reasons_for_a_recommendation_and_guesses_are_no_root_causes():
    message = """## My recommendation: option B

**Why:**
1. **The notebook is the product.** Your notes, organised.
2. **It works offline.**

If that works, the issue is in the `sync()` loop. It might be the `retry_after` header.

**Root cause:** the `sync()` loop dropped the cursor after a 429.

Does option B feel right?"""
    outcome = session_outcome(message)
    assert outcome.root_causes == ["the `sync()` loop dropped the cursor after a 429"]
    assert outcome.next_steps == []


def test_a_cause_stated_as_a_phrase_keeps_its_label():
    """Claude often labels a cause and names it in a phrase; lifted out bare, the phrase would read as a
    fragment ("NVIDIA drivers without proper suspend configuration"), and a phrase with no -s word in it
    would be dropped. Behind its label it says what the cause was."""
    message = """The suspend freezing comes from the graphics setup. Here's what I found:

**Root Cause**: NVIDIA drivers without proper suspend/power management configuration
- The nixos-hardware module enables NVIDIA but disables modesetting

**Diagnosis:** Missing null check in `parse()`

**Root cause:** the `sync()` loop dropped the cursor after a 429."""
    assert session_outcome(message).root_causes == [
        "Root cause: NVIDIA drivers without proper suspend/power management configuration",
        "Root cause: Missing null check in `parse()`",
        "the `sync()` loop dropped the cursor after a 429",  # a sentence already says it
    ]
    # the label is what makes the phrase a statement: an item under a heading gets none
    assert session_outcome("## Root Cause\n\nIf you:\n- Merge the server's rows from backfill\n"
                           "- Then send the user's money_movement in delta sync\n").root_causes == []
    assert fact_flaw("Root cause: Missing null check in `parse()`") is None
    assert fact_flaw("Root cause: the") is not None
    assert fact_flaw("Root cause: I've added a null check") is not None
    from memory_anchor.worker.memory.model import root_cause_facts

    fixed = "Added the null check to `parse()`"
    assert root_cause_facts({"done": [fixed], "root_causes": ["Root cause: Missing null check in `parse()`"]}) == [
        f"{fixed}. Root cause: Missing null check in `parse()`"]


def test_a_cause_claude_repeats_from_a_file_it_wrote_is_not_a_finding():
    written = local.compress_tool_use({"tool_name": "Write", "tool_use_id": "w1", "tool_input": {
        "file_path": "/p/OVERRIDE.md", "content": "# Override\n\nThe nightly check fails because `lint.sh` is skipped."},
        "tool_response": {"type": "create"}})  # fmt: skip
    said = "Root cause: the nightly check fails because `lint.sh` is skipped."
    assert local.summarize_session(["go"], [], said).root_causes
    assert local.summarize_session(["go"], [written], said).root_causes == []


def test_a_fragment_is_refused_as_a_fact_whoever_proposes_it():
    assert not check("We decided to use SiYuan because...", "other", 0.9, None, []).allowed
    assert not check("Known limitations:", "bugfix", 0.9, None, []).allowed
    assert check("The export job runs at 02:00 UTC from `cron/export.sh`.", "configuration", 0.9, None, []).allowed


def test_a_long_sessions_activity_keeps_its_beginning_and_its_latest_turn(store_db):
    """A session of hundreds of tool uses: its summary reads how it began, and its latest record still counts
    as new, so the latest turn's outcome (a root cause, the steps it left) is never frozen at its 200th record."""
    from memory_anchor.worker.pipeline.sessions import ACTIVITY, session_activity
    from memory_anchor.worker.store.records import Records, resolve_view

    with store_db.transaction() as conn:
        Records.put(conn, "prompt", "fix the sync loop", project="p", session_id="long")
        for n in range(ACTIVITY + 30):
            Records.put(conn, "observation", f"Ran step {n}", project="p", session_id="long")
        Records.put(conn, "prompt", "and the retry header", project="p", session_id="long")
    conn = store_db.reader()
    activity = session_activity(conn, resolve_view(conn, "main"), "long")
    texts = [r["text"] for r in activity]
    assert texts[0] == "fix the sync loop" and texts[-1] == "and the retry header" and len(texts) == ACTIVITY + 1
    assert [r["seq"] for r in activity] == sorted(r["seq"] for r in activity)


@pytest.mark.parametrize("text", ["regenerate the protobuf stubs in CI", "reword the error message", "Rewire `auth.py`",
                                  "untangle the import cycle in the worker"])  # fmt: skip
def test_an_imperative_no_list_holds_is_still_a_step(text):
    assert step_flaw(text) is None


def test_a_root_cause_is_led_by_what_was_done_only_when_that_reads_as_a_report():
    """"<what was done>: <why it broke>" tells both; a cut-off label or Claude's account of its own
    work in front of the cause is noise in a verified fact."""
    from memory_anchor.worker.memory.model import root_cause_facts

    cause = "The issue was that completed activities are archived and the ORM skipped them"
    assert root_cause_facts({"done": ["Removed `required=True` from the `user_id` field"], "root_causes": [cause]}) == [
        f"Removed `required=True` from the `user_id` field: {cause}"]
    for done in ("Removed the Group column from:", "I've added `with_context(active_test=False)` to include them",
                 "Let me restart the server"):
        assert root_cause_facts({"done": [done], "root_causes": [cause]}) == [cause], done
    # several causes are the points of the line before them: each stands alone, not behind it four times,
    # unless that line names the code it changed
    points = ["模型名 `DeepSeek-chat` 已经不存在了", "OpenAI 兼容接口是给 OpenAI SDK 用的"]
    assert root_cause_facts({"done": ["从日志中已经能看到两个供应商的问题原因了"], "root_causes": points}) == points
    fixed = "Changed `//notebook` to `//sheet/notebook` in both XPath expressions"
    assert root_cause_facts({"done": [fixed], "root_causes": points}) == [f"{fixed}: {p}" for p in points]
