"""Per-prompt recall answers a question about the project's past from what was said, in other
words too, and stays quiet when memory holds nothing on the subject."""

from __future__ import annotations

import json
from pathlib import Path

REASON = ("We went with SiYuan rather than Obsidian or Logseq: it has a visual canvas, forms, "
          "bidirectional links and a full HTTP API, and it can be self-hosted.")  # fmt: skip
PHONE = ("For working from the phone we use the Happy app as the mobile client for Claude Code "
         "instead of an SSH terminal; it syncs sessions with end-to-end encryption.")  # fmt: skip


def _entry(kind: str, text: str, n: int) -> dict:
    content = text if kind == "user" else [{"type": "text", "text": text}]
    return {"type": kind, "uuid": f"u{n}", "sessionId": "s-past", "timestamp": f"2025-11-29T10:00:{n:02d}Z",
            "message": {"id": f"m{n}", "role": kind, "content": content}}  # fmt: skip


def _past_session(worker, tmp_path: Path, name: str, exchanges: list[tuple[str, str]]):
    """A past session of project `name` as its hooks posted it (a prompt, then the Stop with Claude's
    reply, each exchange), its transcript beside it; then `recall(prompt)` as a new session asks."""
    project = tmp_path / name
    project.mkdir()
    transcript = tmp_path / f"{name}.jsonl"
    turns = [_entry(kind, text, 2 * n + k) for n, pair in enumerate(exchanges) for k, (kind, text) in
             enumerate(zip(("user", "assistant"), pair), start=1)]  # fmt: skip
    transcript.write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in turns) + "\n", encoding="utf-8")
    base = {"session_id": "s-past", "cwd": str(project), "transcript_path": str(transcript)}
    for prompt, reply in exchanges:
        worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}, expect=202)
        worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                       "last_assistant_message": reply}, expect=202)  # fmt: skip
    worker.wait_idle()

    def recall(prompt: str) -> str:
        return worker.post("/api/v1/recall", {"prompt": prompt, "cwd": str(project), "session_id": "s-now"})["context"]

    return recall


def test_recall_answers_from_earlier_replies_and_is_quiet_without_an_answer(worker, tmp_path: Path) -> None:
    recall = _past_session(worker, tmp_path, "notes-app", [("which notes tool should we build on?", REASON),
                                                           ("and how do i use it away from my desk?", PHONE)])  # fmt: skip

    assert "Logseq" in recall("why did we choose siyuan over logseq for the notes?")
    assert "Happy app" in recall("what do we use to work from a mobile device?")  # other words than were said
    assert recall("how did we configure the kubernetes ingress for the staging cluster?") == ""
    assert recall("which kafka topics does the billing consumer read from?") == ""


LOOKED = ("About the laptop freezing when it goes to sleep: I read the flake, the hardware module and the power "
          "settings, and compared them with what the machine "
          "had before the configuration was split into lib/. The swap partition and the resume device are set as "
          "they were. The kernel parameters are the defaults of nixos-hardware for this model. The display manager "
          "and the compositor start as before, and the journal of the last boot shows no error before the freeze. ")  # fmt: skip
FOUND = "The T500 freezes on resume from sleep because NVIDIA power management is off in its hardware module."


def test_a_long_reply_is_recalled_by_its_part_that_answers_with_what_it_replied_to(worker, tmp_path: Path) -> None:
    """Claude's reply often answers after its preamble; its opening would cut the answer off. And
    the user's words it replied to are part of what it says ("it's behind the webBackfillLoad flag")."""
    recall = _past_session(worker, tmp_path, "laptop-conf", [
        ("the laptop locks up when it goes to sleep, it's the thinkpad with the gen3 config", LOOKED + FOUND),
        ("ok, leave it for now and tidy up the readme", "The README now lists the three hosts.")])  # fmt: skip

    context = recall("why did the T500 freeze on resume, what did we find?")
    assert "NVIDIA power management is off" in context
    assert '[claude said to "the laptop locks up when it goes to sleep, it\'s the thinkpad with the gen3 config"] …' in context


def test_an_excerpt_keeps_the_opening_unless_a_later_sentence_says_more_of_the_prompt():
    from memory_anchor.worker.context.recall import excerpt
    from memory_anchor.worker.memory.cues import terms

    reply = "The cache is rebuilt at start-up. " + "Nothing else changed in the worker. " * 12 + "The cache key is the file's hash."
    assert excerpt(reply, terms("when is the cache rebuilt?"), 120).startswith("The cache is rebuilt at start-up.")
    keyed = excerpt(reply, terms("what is the cache key made of? the hash?"), 120)
    assert keyed.startswith("…Nothing else changed") and keyed.endswith("The cache key is the file's hash.")
    assert excerpt(reply, set(), 60) == "The cache is rebuilt at start-up. Nothing else changed in…"


MARKET = "现阶段先不做德国市场：德国对 OEKO 认证要求很高，而我们还没有任何国际市场准入认证。"
REPORT = "月度复盘报告已经生成，统一放在桌面的“运营复盘”文件夹里，格式是 Word（.docx），方便你直接转发。"


def test_recall_in_chinese_goes_by_the_questions_subject_not_the_english_models_similarity(worker, tmp_path: Path) -> None:
    """The embedding model reads English: to it any two Chinese texts look alike. Recall for a Chinese
    prompt keeps what says most of the prompt's subject, and stays quiet on a subject memory lacks."""
    recall = _past_session(worker, tmp_path, "shop-ops", [("我们下一步先开拓哪些国家？", MARKET), ("帮我把这个月的复盘做成报告", REPORT)])

    assert "OEKO" in recall("为什么现阶段不做德国市场？")
    assert "运营复盘" in recall("月度复盘报告放在哪里，用什么格式？")
    assert "运营复盘" in recall("每个月的复盘报告最后存到哪个文件夹了？")  # says half of what it asks about (5 of 9 pairs)
    assert recall("redis 集群的密码怎么轮换？") == ""
    assert recall("上个月 ios 推送通知为什么收不到了？") == ""


def test_a_cjk_questions_subject_is_its_words_without_how_it_asks():
    """Pairs of a CJK run cut where the question's grammar sits (的, 哪里, 怎么, kana particles), and
    the other scripts' words as written: what to look for in a memory, word for word."""
    from memory_anchor.worker.memory.cues import share_said, subject_terms

    assert subject_terms("工厂网站做好放在哪里？") == {"工厂", "厂网", "网站", "站做", "做好", "好放"}
    assert subject_terms("accio 导出的商品数据有什么问题？") == {"accio", "导出", "商品", "品数", "数据", "问题"}
    assert subject_terms("デプロイはどうやって設定した？") == {"デプ", "プロ", "ロイ", "設定"}
    question = subject_terms("为什么现阶段不做德国和日本市场？")
    assert share_said(question, "现阶段先不做德国市场：德国对认证要求很高") >= 0.6
    assert share_said(question, "桌面还有很多文件夹没有整理") == 0.0


def _tool_use(project: Path, n: int, tool: str, tool_input: dict, tool_response: dict) -> dict:
    return {"session_id": "s-past", "transcript_path": str(project.parent / "s-past.jsonl"), "cwd": str(project),
            "hook_event_name": "PostToolUse", "tool_name": tool, "tool_use_id": f"toolu_past_{n}",
            "tool_input": tool_input, "tool_response": tool_response}  # fmt: skip


def test_a_session_named_by_a_later_prompt_recalls_the_files_it_changed(worker, tmp_path: Path) -> None:
    """A session's summary lists only its first few requests; "how did we fix <what I asked later>?"
    still names it, and recall gives what it changed, led by the request the prompt named."""
    project = tmp_path / "uploads"
    project.mkdir()
    recall = _past_session(worker, tmp_path, "uploads-notes", [])  # a project of its own for the quiet check
    later = "be sure to also retry the uploader when the storage bucket times out"
    base = {"session_id": "s-past", "cwd": str(project), "transcript_path": str(tmp_path / "s-past.jsonl")}
    for n, prompt in enumerate(["/catchup", "show me the open tickets", "continue with the queue worker",
                                "now update the changelog", later]):  # fmt: skip
        worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}, expect=202)
    path = str(project / "src" / "uploader.py")
    worker.post("/api/v1/events", _tool_use(project, 1, "Edit", {"file_path": path, "old_string": "send(x)",
                                                                  "new_string": "retry(send, x)"},
                                            {"filePath": path, "oldString": "send(x)", "newString": "retry(send, x)"}),
                expect=202)  # fmt: skip
    worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                   "last_assistant_message": "Done: the uploader retries now."}, expect=202)  # fmt: skip
    worker.wait_idle()

    asked = worker.post("/api/v1/recall", {"prompt": f'How did we fix "{later}" before? Which files did we change?',
                                           "cwd": str(project), "session_id": "s-now"})["context"]  # fmt: skip
    [line] = [line for line in asked.splitlines() if line.startswith("- [session]")]
    assert f"asked: {later}" in line and "src/uploader.py" in line
    assert recall(f'How did we fix "{later}" before?') == ""  # another project's memory is not this one's


def test_recall_shows_the_command_claude_described_in_other_words(worker, tmp_path: Path) -> None:
    """"Where does the plugin get deployed?": the answer is the command Claude ran under a description."""
    recall = _past_session(worker, tmp_path, "notes-plugin", [("build the notes plugin", "Built it.")])
    project = tmp_path / "notes-plugin"
    command = ("cp -r /home/dev/projects/notes/plugin/dist/* /home/dev/docker/compose/appdata/notes/workspace/data/plugins/"
               "notes-explorer/ && echo deployed")  # fmt: skip
    worker.post("/api/v1/events", _tool_use(project, 2, "Bash", {"command": command, "description": "Deploy plugin to the notes app"},
                                            {"stdout": "deployed", "stderr": "", "interrupted": False}), expect=202)  # fmt: skip
    worker.wait_idle()

    assert command in recall("where does the notes plugin get deployed so the notes app picks it up?")


def test_search_finds_claudes_reply_to_an_earlier_prompt_in_the_questions_words(worker, tmp_path: Path) -> None:
    """A question in the words of an earlier prompt finds that prompt first; what was found then is in
    Claude's reply, which shares none of its words: the reply is lifted by the prompt it answers."""
    noise = [(f"check the docker compose file for service {n}", f"Service {n} restarts cleanly; its docker image is current.")
             for n in range(8)]  # fmt: skip
    _past_session(worker, tmp_path, "shop-infra", [
        *noise[:4],
        ("after the restart docker is in 502 bad gateway", "Odoo itself is up: the proxy container odoo-nginx-1 lost its "
                                                           "upstream; reload it with `systemctl reload web-proxy`."),
        ("now add a footer to the invoice report", "Added the footer to the invoice report template."),
        *noise[4:],
    ])  # fmt: skip
    found = worker.post("/api/v1/memories/search", {"query": "why did docker give a 502 bad gateway after the restart?",
                                                    "top_k": 3, "filters": {"project": str(tmp_path / "shop-infra")}})  # fmt: skip
    assert any("odoo-nginx-1" in (hit.get("memory") or "") for hit in found["results"])


def test_below_the_threshold_a_hit_must_share_two_of_the_prompts_words():
    """Meaning alone decides above the threshold; below it, down to 0.40, a hit found by both sides
    must say two of the prompt's words: one shared word ("migrations") is no answer."""
    from memory_anchor.worker.context.recall import holds_an_answer
    from memory_anchor.worker.memory.cues import terms

    wanted = terms("what was the outcome of the salesforce crm migration?")
    one_word = {"similarity": 0.44, "match": "vector+keyword", "title": "Used PowerShell", "text": "migrations"}
    two_words = {"similarity": 0.44, "match": "vector+keyword", "text": "The Salesforce migration moved 3,200 accounts"}
    assert not holds_an_answer(one_word, 0.5, wanted)
    assert holds_an_answer(two_words, 0.5, wanted)
    assert holds_an_answer({**one_word, "similarity": 0.55}, 0.5, wanted)  # close in meaning: words aside
    assert not holds_an_answer({**two_words, "match": "keyword", "similarity": None}, 0.5, wanted)  # words alone never
    # a name is one thing, and enough: a file the question names
    named = terms("what's in CLAUDE.md for this project?")
    assert holds_an_answer({"similarity": 0.44, "match": "vector+keyword", "text": "CLAUDE.md now says to pull main first"},
                           0.5, named)  # fmt: skip
    assert not holds_an_answer({"similarity": 0.44, "match": "vector+keyword", "text": "the project builds"}, 0.5, named)


def test_a_standing_rule_is_recalled_by_two_shared_words_or_a_name_never_by_one_word(worker, tmp_path: Path) -> None:
    """Every standing rule is in the briefing already; recalled again, it must be about the prompt. One
    shared word is a coincidence ("generated" in a question about the website's docs)."""
    recall = _past_session(worker, tmp_path, "svc", [
        ("never edit generated files by hand, regenerate them with make gen", "Understood, I will regenerate them."),
        ("always keep CLAUDE.md short, under 100 lines", "Noted: CLAUDE.md stays under 100 lines."),
        ("以后不管什么改动都要先跑测试。", "好的，以后每次改动前先跑测试。"),
        ("以后提交代码的时候都要附上测试结果。", "好的，提交时会附上测试结果。")])  # fmt: skip

    assert "never edit generated files by hand" in recall("can I just edit the generated protobuf files by hand?")
    assert "always keep CLAUDE.md short" in recall("what's in CLAUDE.md for this project?")  # a name is one thing, and enough
    assert "never edit generated" not in recall("why are the generated docs on the website out of date?")
    assert "先跑测试" in recall("改动之前要先做什么？")  # 改动 is half of what it asks about
    assert "先跑测试" not in recall("这是什么？")  # all grammar: "什么" is no subject to share
    # "…的时候" is how the question asks, not what about: its pairs 的时 and 时候 are no two shared words
    assert "附上测试结果" not in recall("gradle 签名失败的时候，安卓构建出了什么问题？")
    assert "附上测试结果" in recall("提交代码之前要注意什么？")
