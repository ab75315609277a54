"""The user's standing instructions, read without Claude: only what is said as a lasting instruction.

"always", "never" and "instead of" are everywhere in what people type, and most
of it is no instruction: bug reports, narration, replies that pick an option.
The examples are worded after what real Claude Code prompts look like (typos,
profanity, lower case and all); the four-language cases are in test_knowledge.py.
"""

from __future__ import annotations

import pytest

from memory_anchor.worker.memory.instructions import HEDGED, PLAIN, REPLY, bans, standing_statements


def briefed(prompt: str, **kw) -> list[tuple[str, str]]:
    """The (kind, text) a prompt would put in the briefing: the ones stored active (>= 0.9)."""
    return [(s.kind, s.text) for s in standing_statements(prompt, **kw) if s.confidence >= 0.9]


@pytest.mark.parametrize("prompt, kind", [
    ("never make manual changes to generated files", "rule"),
    ("ugh stop making changes without checking with me first", "rule"),
    ("From now on, run the linter before you push.", "rule"),
    ("whenever you add a migration, run makemigrations --check", "rule"),
    ("If you touch the parser, always add a fuzz case.", "rule"),
    ("You should never commit .env files", "rule"),
    ("Commit messages must always be in English.", "rule"),
    ("I want you to always show file paths when I ask where something is.", "rule"),
    # a lasting frame that opens like a question ("when …") and the user's want after it, comma or not
    ("WHEN I ASK WHERE THINGS ARE I NEED FILE PATHS", "rule"),
    ("when i ask where something lives, i want the file path", "rule"),
    ("When you commit, run the linter first.", "rule"),
    ("so for now we treat signedAt as the start of the contract until told otherwise", "decision"),
    ("we deploy with fly.io, so leave the Dockerfile alone", "decision"),
    ("Use pnpm instead of npm in this repo.", "decision"),
    ("Let's use React for the front-end.", "decision"),
    ("All of the code that defines the host attribute should live in `systems/nixos/default.nix`.", "decision"),
    ("I'd rather you use dataclasses over dicts for these records.", "preference"),
    ("I'm not a fan of the catppuccin theme.", "preference"),
    # the user's way of working with a tool
    ("I use `direnv` to set up the devbox shell.", "preference"),
    ("i use home-manager for the program state of my users", "preference"),
])  # fmt: skip
def test_lasting_instructions_in_the_users_words(prompt, kind):
    [(found, _)] = briefed(prompt)
    assert found == kind


@pytest.mark.parametrize("prompt", [
    # bug reports and descriptions
    "It always seems to be /Users which is last in the list.",
    "URLField throws ValueError instead of ValidationError on clean.",
    "This loading state always shows, even after the data arrived.",
    "As far as I can tell it never sees the manage.py itself.",
    # narration of the user's own life or past
    "I have a project where I never render forms with the {{ form }} expression.",
    "Recently I migrated from Django 3.0 to Django 3.1.",
    "I tried to make sure the conditional blocks were never rendered.",
    "nope it never worked",
    # conditions and one-offs
    "If we drop the assumption that the admin is always accessed via its pk, then we're good to go.",
    "don't commit yet, I want to look first",
    "Use the `rg` command for now, it is faster.",
    "dont revert anything, figure out why it broke",
    # replies that pick an option, requests, questions, fragments
    "let's go with the second option",
    "I like hybrid",
    "I would like to pull all branches",
    "should we always squash merges?",
    "when you commit do you run the linter?",
    "When I ask it to build, I need to wait ten minutes.",
    "when we deploy, we always lose the cache",
    "I use this helper to parse dates but it returns None",
    "I use it for testing",
    "Can I use ruff for formatting?",
    "I used to use black for formatting",
    "instead of",
    "never mind",
])  # fmt: skip
def test_what_only_looks_like_an_instruction(prompt):
    assert briefed(prompt) == []


def test_a_reply_to_claudes_question_stands_only_when_it_says_so_plainly():
    assert briefed("lets use createdAt", answers_a_question=True) == []
    [pending] = standing_statements("lets use createdAt", answers_a_question=True)
    assert pending.confidence == REPLY  # a choice for the matter at hand: it waits in Approvals, never briefed
    assert briefed("yes, and never use updatedAt for this again", answers_a_question=True) == [
        ("rule", "yes, and never use updatedAt for this again")]


def test_instructions_inside_pasted_material_or_claude_code_text_are_not_the_users():
    pasted = ("Can you look at this report? Here is the issue text:\n"
              "Never call save() inside a signal handler, the docs say.\n"
              "Always use select_for_update when you lock rows.")  # fmt: skip
    assert briefed(pasted) == []
    summary = ("This session is being continued from a previous conversation that ran out of context. "
               "The conversation is summarized below:\n- The user said: never edit generated files.")  # fmt: skip
    assert briefed(summary) == []
    assert briefed("Base directory for this skill: /x\n\nAlways search memory before answering.") == []


def test_claudes_rule_stands_on_the_quoted_sentence_and_says_no_more_than_it():
    """The source rule for Claude's proposals (provenance.check): its quote must be the user's own
    sentence, and the rule may reword it (a Chinese paraphrase shares the user's characters, not
    their bigrams) but not add to it."""
    from memory_anchor.worker.memory.provenance import Prompt, check

    said = "不要再用 flake8 了，统一用 ruff。"
    prompts = [Prompt("/orders 接口返回的时间不对，帮我查一下。以后提交前都要先运行 ruff check。"), Prompt(said)]
    reworded = check("不再使用 flake8，代码检查统一用 ruff。", "decision", 0.95, said, prompts)
    assert reworded.allowed and reworded.source == said
    more = check("统一用 ruff，并且所有提交都要经过两人审核和安全扫描。", "rule", 0.95, said, prompts)
    assert not more.allowed  # two reviewers and a security scan: the user never said so
    elsewhere = check("部署前必须通知运维团队。", "rule", 0.95, "部署前必须通知运维团队。", prompts)
    assert not elsewhere.allowed  # a quote that is no prompt's sentence
    english = check("Use ruff, never flake8, and squash every commit.", "rule", 0.95,
                    "stop using flake8, use ruff", [Prompt("stop using flake8, use ruff")])  # fmt: skip
    assert not english.allowed  # "squash every commit" is not in what the user said


# --- what people say without "always" or "never": said once, briefed as such ---------------------------


def said_once(prompt: str, **kw) -> list[tuple[str, str]]:
    """The (kind, text) a prompt gives in the said-once tier: briefed in the user's words, marked unconfirmed."""
    return [(s.kind, s.text) for s in standing_statements(prompt, **kw) if s.confidence == HEDGED]


@pytest.mark.parametrize("prompt, kind", [
    # "make sure …" / "be sure to also …" asking for a way of working, typos and all
    ("make sure that the release script updates the changelog if  neede", "rule"),
    ("be sure to also use the shared fixtures. you can add new ones per module", "rule"),
    ("yes. also be sure to allow for dark mode and potentially a compact view if possible", "rule"),
    ("add the new module to the menu, ensure to add the dependencies without create cicles", "rule"),
    # an imperative with a lasting scope, the scope word mistyped
    ("start adding the build number to the footer eqch time so i can tell which one loaded", "rule"),
    ("KEEP THE API DOCS UPDATED THROUGHOUT EVERY SESSION", "rule"),
    # a request with a scope, inside a longer message
    ("update the readme and i also want you to keep the changelog current throughout sessions, not just when told to", "rule"),
    # a requirement on a thing of the project
    ("the onboarding flow must stay exactly as it is", "rule"),
    ("it should be a consistently updated picture of the project and its status", "rule"),
    # permission with a lasting scope
    ("you can run the slow tests in parallel when possible", "preference"),
    # decisions: an arrangement the user wants, where a thing runs
    ("lets have one board for planning and another for bugs", "decision"),
    ("i want to have a notes file per service that holds only that service's decisions", "decision"),
    ("postgres runs from /srv/compose/postgres with its data under /srv/data/pg", "decision"),
    # the project's setup, told so that Claude does not do otherwise
    ("we are using yarn", "decision"),
    ("We're using shadcn so please use: yarn shadcn@latest add scroll-area", "decision"),
    ("No, we already have a dev server running here: http://shop.test", "decision"),
    ("Currently using Obsidian Sync (paid) for the notes", "decision"),
    # an arrangement wanted, said with what it is not
    ("I want there to be a notes folder for the agents INSIDE the repo, not just on my machine", "decision"),
    # a reminder inside a longer sentence, "remember" mistyped
    ("the upload fails on big files, rememeber we are working with Laravel and Inertia", "rule"),
    # opened like a question, asking none: the clause after it still speaks
    ("When I upload the file I get the following, remember we are working with Laravel and Inertia", "rule"),
])  # fmt: skip
def test_instructions_without_always_or_never_are_said_once(prompt, kind):
    [(found, _)] = said_once(prompt)
    assert found == kind


@pytest.mark.parametrize("prompt", [
    "lets move to phase 4",                        # a go-ahead: the work goes on
    "then lets do 1. be sure to document all of this",  # picks an option; "all of this" is the task at hand
    "make sure the server is up to date",          # checks a state now
    "ensure that the build passes",
    "run a bootstrap sync and ensure it contains the field names I expect",  # "ensure" of the task at hand
    "ensure same functionality in the crm module",
    "dont revert anything, figure out why it broke",  # a prohibition about the task at hand
    "we can deal with that whenever best",         # schedules one thing
    "I can track many things, but always return to the main thread",  # the user about themselves
    "For all other skills, use the 'Skill' tool:",  # a clause that introduces what follows
    "## Always run the linter",                    # a heading
    "always use the",                              # a sentence cut off
    "the bug must be in the parser",               # a guess, not a requirement
    "update all the docs",                         # a task: no lasting scope
    "rename the helper throughout the codebase",   # "throughout" a thing: one task
    "make the server start automatically",         # what a feature does, not a way of working
    "format the dates consistently",
    "should we always keep a version number in the UI?",  # a question
    "we are using too much memory on the import",  # a state of things, not the setup
    "we are using the old endpoint and it fails",  # a problem reported
    "we already have that",                        # the matter at hand
    "please group the fields in 3 columns, currently using to much space",  # a state of things, mistyped
    # a "be sure" of the fix asked for in the same sentence
    "now the arrow looks odd please fix them and be sure to keep them behind the cards",
    "This still has a scroll issue, please be sure to not exceed the page width",
])  # fmt: skip
def test_one_offs_questions_and_fragments_are_never_an_instruction(prompt):
    assert standing_statements(prompt) == []


def test_a_reply_that_picks_waits_unbriefed_and_one_that_adds_an_instruction_is_said_once():
    """After "Which layout: A or B?", the pick settles the question at hand; "be sure to" adds a way of working."""
    [pick] = standing_statements("lets use layout B", answers_a_question=True)
    assert (pick.kind, pick.confidence) == ("decision", REPLY)
    [rule] = standing_statements("yes. also be sure to keep it usable on phones", answers_a_question=True)
    assert (rule.kind, rule.confidence) == ("rule", HEDGED)


# --- Chinese: the shape of a message, not only its cue words --------------------------------------------


@pytest.mark.parametrize("prompt", [
    # questions without a question mark: a particle ending a clause, "whether", a question word
    "另外以后我们的所有会话，需要我说归档你才会保存吗，还是会自动保存",
    "模型切换以后我是否可以在设置里随时改",
    # 以后 inside 可以后台 ("can … in the background") or narrating what comes later
    "看板可以后台运行、定时刷新、自动汇总",
    "我为了以后能够更顺利地协作，想先了解需要哪些基础设置",
    # 偏好 as a noun (an ad plan's audience setting), not "I prefer"
    "日预算计划的人群偏好只选了L2，地域偏好是全部",
    # another model's reasoning the user pasted: it speaks of the user in the third person
    "既然他决定部署，我应该给出清楚的下一步",
    "用户现在问我哪种方式更合适，他的需求不只是装上，以后还要维护",
])  # fmt: skip
def test_chinese_questions_nouns_and_pasted_reasoning_are_no_instructions(prompt):
    assert [s.text for s in standing_statements(prompt)] == []


@pytest.mark.parametrize("prompt", [
    "这个客户刚发来询价，我有点拿捏不准",  # 不准 inside 拿捏不准: unsure, no ban
    "接口返回的 retry_after 字段始终是 null",  # 始终 of a value: a description
    "这样以后真的就可以自动归档了",  # what may come later
    "现在用不到不代表以后用不到",
    "旧流程并未禁止重试，但也没说明",  # not forbidden
    "如果缓存数据不准，报表会大面积出错",  # a condition and what follows from it
    "帮我把这个表格转换成 csv 格式",  # 换成 inside 转换成, and a task
    "有没有办法让日志自动归档，并且每次都自动压缩",  # the question goes on past its comma
    "上次那版是采用了轮询的方案",  # a switch told as done
    "这个是我来定还是让客户选",  # "A or B" asked without its mark
    "这些标准我之前都和你讨论过",  # 之前 of the past, not before an act
    "关键词可能有遗漏，因为每次输出的说法不一样，我不可能都列完",  # 每次 in a reason; 都 far off
])  # fmt: skip
def test_chinese_cue_words_that_govern_nothing_to_be_done_give_no_instruction(prompt):
    assert [s.text for s in standing_statements(prompt)] == []


@pytest.mark.parametrize("prompt, confidence", [
    ("以后生成报告后你需要自动打开它", PLAIN),  # a time to come, then what is to be done
    ("每次改完配置，都先跑一遍校验脚本", PLAIN),
    ("部署前必须通知运维团队", PLAIN),  # before an act that recurs
    ("绝对不要在生产库上直接改数据", PLAIN),  # a ban with no end
    ("发布说明必须写中英双语", HEDGED),  # an obligation of the matter at hand: said once
    ("不要来回改方案，一次给出结论让我确认", HEDGED),
])  # fmt: skip
def test_a_chinese_instruction_is_plain_when_it_governs_every_case_and_said_once_otherwise(prompt, confidence):
    [statement] = standing_statements(prompt)
    assert (statement.kind, statement.confidence) == ("rule", confidence)


def test_a_task_over_all_of_something_is_no_rule_for_every_case():
    """把所有… is what to do to all of the things at hand, once; 所有…都要 as its subject is every case."""
    assert all(s.confidence < PLAIN for s in standing_statements("我需要你把所有旧的日志都删掉"))
    [rule] = standing_statements("所有删除操作都要先问我")
    assert rule.confidence == PLAIN


@pytest.mark.parametrize("prompt", [
    # a brief for one conversation, often written by Claude in an earlier session and pasted
    "你是本项目的审查者。你的任务是找出方案里的漏洞。\n\n以后所有结论都要附上证据。",
    "You are the reviewer for this repository. Your task is to find holes in the plan.\n\nAlways cite the file you read.",
    # the role set in a paragraph of its own, the user named in the third person
    "Review the open issues of the vault.\n\nYour role is triage and coordination.\n\nDo this:\n- group the issues\n"
    "- tell Logan what should be paused or rewritten next\n\nAlways be concise and practical.",
    # a review tool's template before each of its points
    "Fix the following issues.\n\n- Verify each finding against the current code and only fix it if needed.\n\n"
    "In a.md at line 6, add a space.\n\n- Verify each finding against the current code and only fix it if needed.\n\n"
    "In b.md at line 2, add the tags.\n\n- Verify each finding against the current code and only fix it if needed.\n\n"
    "In c.md at line 9, use a colon.",
    # a model's output pasted whole: it narrates its own next step
    "Now I have a complete picture. Let me write the report.\n\nNever run the migrations on a copy.",
    "现在我对数据流有了完整追踪。让我写出审查报告。\n\n以后导出前都要先备份。",
    # what a Chinese introducer brings in
    "以下是另一个对话的分析：\n\n以后所有的导出都要先备份，不要直接覆盖。\n\n第三节还有两个问题没有说清楚，需要再讨论一下才能定下来。",
])  # fmt: skip
def test_a_brief_for_an_agent_and_pasted_model_output_are_not_the_users_words(prompt):
    assert standing_statements(prompt) == []


@pytest.mark.parametrize("prompt", [
    "You are right, from now on always run the linter before you commit.",
    "you are the best. never push to main without a review",
    "你是对的，以后都要先跑测试",
])  # fmt: skip
def test_speaking_to_claude_is_no_brief(prompt):
    assert [s.confidence for s in standing_statements(prompt)] == [PLAIN]


def test_a_chinese_rule_after_a_question_in_the_same_sentence_is_kept_without_the_question():
    [statement] = standing_statements("能帮我清理一下下载目录吗，但是所有删除都要先问我")
    assert statement.text == "但是所有删除都要先问我" and statement.confidence >= 0.9


def test_as_far_as_possible_and_things_not_known_are_no_hedges():
    [statement] = standing_statements("不清楚和不确定的地方绝对不要编造，一定要先问我")
    assert statement.confidence >= 0.9  # 不确定 here is what to ask about, not the user unsure
    [statement] = standing_statements("以后能自动完成的都尽可能自动完成，不要让我手动导出")
    assert statement.confidence >= 0.9


@pytest.mark.parametrize("prompt", [
    # Claude's questions copied back, answered inline: its plan lines are not the user's rules
    "1. 方案\n方案A：逐个文件夹整理——选A\n旧文件：是否直接删除？——是\n模板：是否留在原处？——是\n\n3. 风险控制\n整理前备份\n每次操作前确认",
    # a pasted outline of someone else's principles, the user's question in its last line
    "1. 先想清楚\n说明假设\n不要默默选一个\n2. 保持简单\n不需要的功能不要加\n只用一次的东西不要抽象\n"
    "3. 小步修改\n只动必须动的\n没坏的东西不要重构\n4. 目标驱动\n多步骤任务先给计划\n这些原则里哪些我已经在用",
    # a table row copied from a page
    "能力\t可以后台运行任务、每次都自动检查\t需要逐轮交互\n方式\t直接执行\t只给建议",
])  # fmt: skip
def test_text_the_user_brought_into_the_prompt_gives_no_instruction(prompt):
    assert [s.text for s in standing_statements(prompt)] == []


# --- what the user asks to be kept: said to last, whatever its grammar ----------------------------------


@pytest.mark.parametrize("prompt, kind, text", [
    ("save in memory dont touch the prod database unless i ask for it, for every project", "rule",
     "dont touch the prod database unless i ask for it"),
    ("never run migrations yourself, save in your memory please", "rule", "never run migrations yourself"),
    # at the end of a pasted error, typos and all
    ("KeyError: 'tree'\n\nValid keys are: list, form and save memory we are runnig postgres16, not 14", "decision",
     "we are runnig postgres16"),
    ("i liked how you deploy with the compose file save for the future in teh momory, later check the cron", "rule",
     "i liked how you deploy with the compose file"),
    ("remember that the staging db is read only", "rule", "the staging db is read only"),
    # what "this" names was said before the request: the rule keeps it
    ("move the config to /etc/app, and save in memory this is where configs live", "rule",
     "move the config to /etc/app, this is where configs live"),
    ("add this to CLAUDE.md: tests run with pytest -n 2", "rule", "tests run with pytest -n 2"),
    # a request put as a question, when it says what to keep
    ("can you save in your memory that we deploy with docker compose?", "decision", "we deploy with docker compose"),
    ("好的，你把部署步骤写进 CLAUDE.md 里，需要时再看", "rule", "好的，你把部署步骤写进 CLAUDE.md 里，需要时再看"),
])  # fmt: skip
def test_what_the_user_asks_to_keep_in_memory_is_briefed_in_their_words(prompt, kind, text):
    [statement] = standing_statements(prompt)
    assert (statement.kind, statement.text, statement.confidence) == (kind, text, 0.95)


def test_a_line_the_user_adds_to_claude_md_with_the_hash_shortcut_is_kept_plainly():
    """Claude Code before 2.0 records `# text` as a memory input: the user chose to keep it, whatever its grammar."""
    for typed, text in [("<user-memory-input> Never edit the .env file without authorization </user-memory-input>",
                         "Never edit the .env file without authorization"),
                        ("<user-memory-input>Review all the changes and update all the Claude.md files</user-memory-input>",
                         "Review all the changes and update all the Claude.md files")]:  # fmt: skip
        [statement] = standing_statements(typed)
        assert (statement.kind, statement.text, statement.confidence) == ("rule", text, 0.95)
    # Only a whole memory input is one: a prompt that quotes the tag is the user's words as they are.
    assert standing_statements("what does <user-memory-input> mean in the transcript?") == []


def test_a_list_the_user_asks_to_put_in_claude_md_is_one_rule_an_item():
    found = standing_statements("在CLAUDE.md里写几条原则：\n1.少说话，多做事\n2.不确定就问我")
    assert [s.text for s in found] == ["少说话，多做事", "不确定就问我"]


@pytest.mark.parametrize("prompt, said", [
    ("can you save in your memory where the docker folder is?", "can you save in your memory where the docker folder is"),
    # typos and all, without why it is to be kept
    ("can you save in teh momory the location of the addons, docker and docs folders and the command to update the "
     "modules, so next time i run claude in any of them you understand the same requests?",
     "can you save in teh momory the location of the addons, docker and docs folders and the command to update the "
     "modules"),
])  # fmt: skip
def test_a_polite_request_to_keep_what_claude_knows_of_a_thing_is_said_once_in_the_users_words(prompt, said):
    """What is to be kept is Claude's to fill in, so the briefing can show only the ask, as the user put it."""
    [statement] = standing_statements(prompt)
    assert (statement.text, statement.confidence) == (said, 0.75)


@pytest.mark.parametrize("prompt", [
    "why did you save that in your memory?",
    "can you save it in your memory?",  # keeps what was just said: nothing the briefing could show
    "add memory search to the worker",
    "use a generator here to save memory",
    "this will save memory and time on big files",
    "keep it in memory instead of writing it to disk",
    "能把这些写进 CLAUDE.md 吗",
])  # fmt: skip
def test_memory_as_a_feature_ram_or_a_question_is_nothing_to_keep(prompt):
    assert standing_statements(prompt) == []


@pytest.mark.parametrize("prompt, kind", [
    # design decisions said in the first person, inside a longer message: said once
    ('I like the names "draft", "review" and "final" for the three stages.', "decision"),
    ("<ide_opened_file>The user opened the file /src/api/sync.ts in the IDE. This may or may not be related "
     "to the current task.</ide_opened_file> I'm leaning towards a separate export endpoint. I feel that is clearer.",
     "decision"),
    ("But I still want to use the existing render_for_response helpers like render_budget_for_response", "preference"),
    ("I want to add a test for the empty state. Help me think through how we'll do this before you suggest changes.",
     "rule"),
    ("I think I want to leave render_totals mostly as is initially and later make it handle only the deltas", "decision"),
    ("I like the loop change. PlainDate is mutable so only call addDays on a copied variable.", "rule"),
    # a requirement on a named thing, and what the user wants of one
    ("out of stock should be a filter option, off by default", "decision"),
    ("I feel as though the `lib/hosts` directory should only hold machine-level definitions", "decision"),
    ("I need the dev container to reflect my whole local setup", "decision"),
    # what the user settles for the team, typed as people type
    ("ok never mind. so i think we should move the expiry logic into the storage layer", "decision"),
    ("yes, basically if we're setting signed at, we should also compute expires at in the query", "decision"),
    # a want with its reason, and how the user will work
    ("That directory has no default.nix. I want it to be a flake, for the sake of injecting the dotfiles repo.",
     "decision"),
    ("I will use codespaces to work from my phone or a friend's pc", "preference"),
    # the same in French, and in Chinese: all of it, by itself
    ("en fait j'aimerais que le log global ait des filtres pertinents (last hour, last day, last week)", "decision"),
    ("我需要你全自动帮我配置", "preference"),
    ("列出太宏观的内容，对我没有实际帮助，我需要的是实操方案，不是仅仅表述问题", "preference"),
    ("what I need is a plan I can act on, not a list of problems", "preference"),
])  # fmt: skip
def test_design_decisions_in_the_first_person_are_said_once(prompt, kind):
    assert [k for k, _ in said_once(prompt)] == [kind]
    assert briefed(prompt) == []


@pytest.mark.parametrize("prompt", [
    "I like option 2 to avoid another endpoint.",
    "I like the names you picked",  # a reaction, no naming decided
    "i still want to use it",  # about the thing at hand
    "Help me think through this.",
    "Please ensure it's running on port 8081",
    "only change the tests in this file",
    "I want to leave it as is",
    # what the user expects to see, or guesses, of a thing
    "the tests should pass now",
    "the login page should load fine after the restart",
    "maybe phones should actually be an array",
    "in the last columns should be the totals",
    "I need the tests to pass before lunch",
    "we should be fine now",
    "we should fix the login bug first",  # the next move, not how things are to be
    "we should check the logs again",
    "this project also uses siyuan to document stuff so we should include that too",  # the matter at hand
    "I will use the debugger to find where it hangs",
    "I want it to be tested so that we can merge it now",
    "we should probably restart the worker",
    "well, that worked",
    "I want it to show the total",  # a want without a reason is the task at hand
    "I will use it later",
    "我需要你先整理这个文件夹的内容",
])  # fmt: skip
def test_reactions_and_requests_of_the_moment_are_not(prompt):
    assert standing_statements(prompt) == []


def test_well_before_a_decision_is_well_without_its_apostrophe():
    [typed] = standing_statements("well stick with the impl i have laid out")
    [meant] = standing_statements("we'll stick with the impl i have laid out")
    assert (typed.kind, typed.confidence) == (meant.kind, meant.confidence) == ("decision", 0.9)


@pytest.mark.parametrize("prompt, kind", [
    # a request over a kind of case, after a mistake
    ("上次你把我的表格覆盖了，我需要你针对会覆盖文件的操作都先提醒我", "rule"),
    # a time to come and a prohibition
    ("我下次导入新的客户名单时，不能导入已经拉黑的客户", "rule"),
    # how to think about the work
    ("我需要你用长期复购的思维去设计这个活动", "preference"),
])  # fmt: skip
def test_chinese_requests_that_hold_beyond_the_task(prompt, kind):
    [statement] = standing_statements(prompt)
    assert statement.kind == kind and statement.confidence >= 0.9


@pytest.mark.parametrize("prompt", [
    "我需要你帮我把全店商品导出一份表格",  # one task
    "下次再说吧",
    "我需要你先整理这个文件夹",
])  # fmt: skip
def test_chinese_tasks_are_not(prompt):
    assert standing_statements(prompt) == []


def test_a_chinese_decision_said_plainly_stays_plain_whatever_else_it_asks():
    [statement] = standing_statements("我需要你全部改用 pnpm")
    assert (statement.kind, statement.confidence) == ("decision", 0.9)


def test_a_rule_in_the_users_thinking_aloud_is_a_design_still_in_talk():
    prompt = ("I'm trying to think of all the cases but the big idea is that if the start date changed and there is "
              "data in older months, we need to clear it, but we must always rerun the totals if the start date is sent "
              "up from the device and we need to start from that month help me think through this")  # fmt: skip
    assert standing_statements(prompt) == []


def test_of_a_long_run_on_sentence_the_clause_that_says_it_is_kept():
    prompt = ("the export page is slow and the numbers look off for the older months and i have been going back and "
              "forth on the sums for a while now without getting anywhere near a version that i would be happy to ship "
              "to everyone on the team, and i also want you to keep the changelog current throughout sessions not just "
              "when i ask for it because i keep forgetting what changed")  # fmt: skip
    [statement] = standing_statements(prompt)
    assert statement.text.startswith("i also want you to keep the changelog current throughout sessions")


def test_who_decides_is_a_rule_and_decision_making_no_decision():
    [statement] = standing_statements("可以清理，但是所有覆盖动作都要给我决策")
    assert statement.kind == "rule"
    [statement] = standing_statements("我的精力有限，我做判断和决策，执行交给你")
    assert statement.kind == "rule"


@pytest.mark.parametrize("prompt, found", [
    ("dont use lambdas", True),
    ("donts add emojis", True),  # a stray letter
    ("don't use that", False),
    ("don't add the test", False),
    ("don't revert anything", False),
    # Of what Claude hands over: "any" makes it a kind, an intensifier or a leading "no" changes nothing.
    ("no dont bloody give me any summaries, just the diff", True),
    ("please don't send me any screenshots", True),
    ("don't give me any plans for this", False),  # about the task at hand
])  # fmt: skip
def test_a_prohibition_of_a_whole_kind_of_thing_is_said_once(prompt, found):
    assert said_once(prompt) == ([("rule", prompt)] if found else [])


@pytest.mark.parametrize("prompt, found", [
    # French keeps its cue words, accents or not: a memory request and "désormais" said plainly ...
    ("modifie claude.md pour lancer les tests a chaque debut de session", ("rule", PLAIN)),
    ("désormais on déploie avec le script de release", ("rule", PLAIN)),
    ("ne fais jamais de force push sur main", ("rule", PLAIN)),
    # ... an imperative with a lasting scope once, also after a comma ...
    ("mets a jour le guide pour que la prochaine fois tu donnes les chemins complets", ("rule", HEDGED)),
    ("le port est 8080, ajoute le au readme pour le retrouver la prochaine fois", ("rule", HEDGED)),
    # ... and a question, a task, a one-off never.
    ("pourquoi tu ne mets pas toujours les chemins complets ?", None),
    ("corrige le test du panier et commit", None),
    ("fais toujours le commit pour l'instant", None),
    # Spanish and German the same way
    ("recuerda que el proyecto usa pnpm y no npm", ("rule", PLAIN)),
    ("a partir de ahora ejecuta los tests antes de cada commit", ("rule", PLAIN)),
    ("nunca hagas push directo a main", ("rule", PLAIN)),
    ("actualiza el README para que la próxima vez tengas las rutas completas", ("rule", HEDGED)),
    ("quiero que el log global tenga filtros por fecha", ("decision", HEDGED)),
    ("¿por qué no usas siempre las rutas completas?", None),
    ("arregla el test del carrito por ahora", None),
    ("merk dir, dass wir pnpm statt npm benutzen", ("rule", PLAIN)),
    ("ab jetzt bitte immer die Tests vor dem Commit laufen lassen", ("rule", PLAIN)),
    ("verwende nie var in diesem Projekt", ("rule", PLAIN)),
    ("warum nutzt du nicht immer die vollen Pfade?", None),
    ("mach das vorerst ohne Tests", None),
])  # fmt: skip
def test_french_spanish_and_german_instructions_keep_their_cue_words(prompt, found):
    statements = [(s.kind, s.confidence) for s in standing_statements(prompt)]
    assert statements == ([found] if found else [])


@pytest.mark.parametrize("sentence, language", [
    ("désormais on déploie avec le script de release", "French"),
    ("a partir de ahora ejecuta los tests antes de cada commit", "Spanish"),
    ("ab jetzt bitte immer die Tests vor dem Commit laufen lassen", "German"),
    ("use the el and las helpers from the template module for this", None),  # English with a few such words
    ("en fait j'aimerais que le log global ait des filtres (last hour, last day, last week, last month)", "French"),
])  # fmt: skip
def test_a_sentence_is_read_in_the_language_most_of_its_words_are(sentence, language):
    from memory_anchor.worker.memory.cue_languages import language_of

    found = language_of(sentence)
    assert (found.name if found else None) == language


def test_whatever_in_chinese_asks_nothing():
    [statement] = standing_statements("不管什么情况，都不要直接删除我的文件")
    assert statement.kind == "rule"


@pytest.mark.parametrize("prompt, banned", [
    ("Commit all, do not add your signature", [("do not add your signature", "add", {"signature"})]),
    ("ok, continue with the test and DO NOT EDIT THE .env file please", [("DO NOT EDIT THE .env file please", "edit", {"env"})]),
    ("don't worry about the flaky test", []),  # a feeling, not work
    ("do not commit yet", []),  # the task at hand
    ("people dont realize that they experience every moment completely differently than anyone else would", []),
    ("should we never add a signature?", []),  # a question
])  # fmt: skip
def test_a_ban_without_a_lasting_scope_is_kept_to_be_read_again(prompt, banned):
    """What `bans` finds is no instruction alone; the same ban in another session is (memory/extraction.py)."""
    assert [(b.text, b.verb, set(b.objects)) for b in bans(prompt)] == banned

