"""The scripted projects of `bench context`: planted knowledge among routine noise.

Each scenario is a project worked on over a few sessions. A session has the
user's prompts, its tool uses (mostly routine: the same test run, `git status`,
reads, searches, again and again) and Claude's last message. Planted items are
what a good briefing must carry into the next session: standing rules and
decisions stated in prompts, root causes and next steps stated in last messages.
Each is checked by a few words that must appear together on one line of the
next SessionStart context (`expect`), so any faithful wording passes and the
wording varies from scenario to scenario and language to language. `stale` are
words of a rule the user later replaced: they must not be briefed as a rule.
Probes are later prompts whose recall must carry the planted answer.

`claude` holds what a model would answer for the session (the Claude path runs
against the fake Messages API, which replies with these): its facts and its
summary, worded differently from the user and from the local extraction.
"""

from __future__ import annotations

from typing import Any


def bash(command: str, stdout: str, *, stderr: str = "", code: int = 0) -> dict[str, Any]:
    response: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "interrupted": False}
    if code:
        response["exit_code"] = code
    return {"tool_name": "Bash", "tool_input": {"command": command}, "tool_response": response}


def read(path: str, content: str) -> dict[str, Any]:
    return {"tool_name": "Read", "tool_input": {"file_path": path}, "tool_response": {"file": {"content": content}}}


def grep(pattern: str, files: list[str]) -> dict[str, Any]:
    return {"tool_name": "Grep", "tool_input": {"pattern": pattern},
            "tool_response": {"filenames": files, "numFiles": len(files)}}  # fmt: skip


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"tool_name": "Edit", "tool_input": {"file_path": path, "old_string": old, "new_string": new},
            "tool_response": {"filePath": path}}  # fmt: skip


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_name": "Write", "tool_input": {"file_path": path, "content": content},
            "tool_response": {"type": "create", "filePath": path}}  # fmt: skip


PASS = bash("pytest -q", "........................................\n120 passed in 3.41s")
STATUS = bash("git status --short", " M app/cart.py\n?? notes.txt")
DIFF = bash("git diff --stat", " app/cart.py | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)")


def routine(n: int, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    """`n` routine tool uses: the same test run and status, over and over, with `extra` mixed in."""
    cycle = [PASS, STATUS, PASS, DIFF, STATUS]
    out = [cycle[i % len(cycle)] for i in range(n)]
    for i, item in enumerate(extra):
        out.insert(min(len(out), 1 + i * 3), item)
    return out


SCENARIOS: list[dict[str, Any]] = [
    {
        "name": "shop (English)",
        "project": "shop",
        "sessions": [
            {
                "prompts": [
                    "The discount in the cart is wrong for 10% coupons, please find out why. "
                    "Always run `pytest -q` before you commit anything.",
                    "btw we deploy with fly.io, so leave the Dockerfile's base image alone.",
                ],
                "tools": routine(
                    12,
                    grep("STRIPE_SECRET_KEY", ["app/payments.py", "config/settings.py"]),
                    bash("pytest -q tests/test_discount.py",
                         "F\nFAILED tests/test_discount.py::test_ten_percent - AssertionError: assert 17.99 == 17.991\n"
                         "1 failed in 0.21s", code=1),  # fmt: skip
                    edit("app/cart.py", "total = round(price, 2) * (1 - rate)", "total = round(price * (1 - rate), 2)"),
                    write("app/session_store.py", "import redis\n\nclient = redis.Redis()\n"),
                ),
                "last": "Fixed the 10% coupon bug in `apply_discount()`.\n\n"
                "**Root cause:** the price was rounded before the discount rate was applied, "
                "so 10% off 19.99 came out one cent wrong.\n\n"
                "Next steps:\n- add a regression test for zero-priced items\n- write the 1.4.2 entry in CHANGELOG.md",
                "claude": {
                    "facts": [
                        {"text": "Run `pytest -q` before every commit.", "confidence": 0.95,
                         "subject": "tests before commit", "category": "rule"},
                        {"text": "The shop deploys with fly.io; the Dockerfile base image must stay as is.",
                         "confidence": 0.93, "subject": "deployment", "category": "decision"},
                        {"text": "The 10% coupon bug: apply_discount() rounded the price before applying the rate "
                                 "(one cent off on 19.99).", "confidence": 0.92, "subject": "discount rounding",
                         "category": "bugfix"},
                    ],  # fmt: skip
                    "summary": {
                        "request": "Fix the wrong discount for 10% coupons.",
                        "completed": "Corrected the rounding order in apply_discount().",
                        "done": ["Corrected the rounding order in apply_discount() (app/cart.py)"],
                        "root_causes": ["apply_discount() rounded the price before applying the rate, "
                                        "off by a cent on 19.99"],  # fmt: skip
                        "next_steps": ["Add a regression test for zero-priced items",
                                       "Add the 1.4.2 entry to CHANGELOG.md"],  # fmt: skip
                    },
                },
            },
            {
                "prompts": ["Decision: we stay on Stripe Checkout rather than building our own card form."],
                "tools": routine(10, write("tests/test_zero_price.py", "def test_zero_price():\n    assert total(0) == 0\n")),
                "last": "Added the regression test for zero-priced items; the suite passes (121 passed).",
                "claude": {
                    "facts": [{"text": "Payments stay on Stripe Checkout instead of a custom card form.",
                               "confidence": 0.95, "subject": "payment form", "category": "decision"}],  # fmt: skip
                    "summary": {"request": "Record the payment form decision and add the zero-price test.",
                                "done": ["Added the regression test for zero-priced items"], "root_causes": [],
                                "next_steps": []},  # fmt: skip
                },
            },
        ],
        "planted": [
            {"what": "rule: pytest before commit", "expect": ["pytest -q", "commit"]},
            {"what": "decision: deploy with fly.io", "expect": ["fly.io"]},
            {"what": "decision: Stripe Checkout", "expect": ["stripe checkout"]},
            {"what": "root cause: rounding order", "expect": ["round", "19.99"]},
            {"what": "next step: changelog 1.4.2", "expect": ["1.4.2", "changelog"]},
        ],
        "closed": [["zero-priced", "regression"]],
        "probes": [
            {"prompt": "how do we deploy the shop?", "expect": ["fly.io"]},
            {"prompt": "why did the discount test fail?", "expect": ["17.99"]},
            {"prompt": "where is the stripe key read?", "expect": ["app/payments.py"]},
        ],
    },
    {
        "name": "orders API (Chinese)",
        "project": "orders-api",
        "sessions": [
            {
                "prompts": ["/orders 接口返回的时间不对，帮我查一下。以后提交前都要先运行 ruff check。",
                            "不要再用 flake8 了，统一用 ruff。"],  # fmt: skip
                "tools": routine(
                    11,
                    bash("ruff check .", "All checks passed!"),
                    read("app/orders.py", "created_at = datetime.now()\n"),
                    edit("app/orders.py", "datetime.now()", "datetime.now(timezone.utc)"),
                ),
                "last": "已修复 /orders 接口的时区问题。\n根本原因：created_at 存的是服务器本地时间，而不是 UTC。\n"
                "下一步：给旧订单数据写一个迁移脚本。",
                # Claude quotes the user's sentence a standing fact stands on, as EXTRACT_SYSTEM asks:
                # its paraphrase alone shares too few of the prompt's characters to be traced to it.
                "claude": {
                    "facts": [
                        {"text": "每次提交前先运行 ruff check。", "confidence": 0.95, "subject": "提交前检查", "category": "rule",
                         "quote": "以后提交前都要先运行 ruff check。"},
                        {"text": "不再使用 flake8，代码检查统一用 ruff。", "confidence": 0.95, "subject": "代码检查工具",
                         "category": "decision", "quote": "不要再用 flake8 了，统一用 ruff。"},
                        {"text": "/orders 时间错误的原因：created_at 保存的是本地时间而非 UTC。", "confidence": 0.92,
                         "subject": "订单时区", "category": "bugfix"},
                    ],  # fmt: skip
                    "summary": {"request": "排查 /orders 接口时间错误。", "done": ["修正了 /orders 的时区处理"],
                                "root_causes": ["created_at 保存的是本地时间而非 UTC"],
                                "next_steps": ["为旧订单数据编写迁移脚本"]},  # fmt: skip
                },
            },
            {
                "prompts": ["决定：缓存改用 Redis，不再用 memcached。"],
                "tools": routine(9, bash("pip install redis", "Successfully installed redis-5.0.4")),
                "last": "缓存已经切换到 Redis，测试全部通过。\n下一步：在预发环境压测缓存命中率。",
                "claude": {
                    "facts": [{"text": "缓存使用 Redis，不再使用 memcached。", "confidence": 0.95, "subject": "缓存",
                               "category": "decision", "quote": "决定：缓存改用 Redis，不再用 memcached。"}],  # fmt: skip
                    "summary": {"request": "把缓存换成 Redis。", "done": ["缓存已切换到 Redis"], "root_causes": [],
                                "next_steps": ["在预发环境压测缓存命中率"]},  # fmt: skip
                },
            },
        ],
        "planted": [
            {"what": "rule: ruff check before commit", "expect": ["ruff check", "提交"]},
            {"what": "rule: no flake8", "expect": ["flake8"]},
            {"what": "decision: Redis cache", "expect": ["redis", "缓存"]},
            {"what": "root cause: local time not UTC", "expect": ["utc"]},
            {"what": "next step: migration script", "expect": ["迁移脚本"]},
            {"what": "next step: load test cache", "expect": ["压测"]},
        ],
        "probes": [
            {"prompt": "提交代码之前要做什么检查？", "expect": ["ruff"]},
            {"prompt": "我们的缓存用的是什么？", "expect": ["redis"]},
        ],
    },
    {
        "name": "ingest worker (Japanese)",
        "project": "ingest",
        "sessions": [
            {
                "prompts": ["今後はマイグレーションを必ずレビューしてからマージしてください。",
                            "ログは structlog を使うことにしました。"],  # fmt: skip
                "tools": routine(
                    12,
                    bash("pytest -q tests/test_pool.py", "E   TimeoutError: pool exhausted\n1 failed in 5.02s", code=1),
                    read("ingest/db.py", "pool = create_pool(max_size=5)\n"),
                ),
                "last": "タイムアウトを修正しました。\n原因は接続プールの上限が 5 だったことです。\n"
                "次のステップ：負荷テストを CI に追加する。",
                "claude": {
                    "facts": [
                        {"text": "マイグレーションは必ずレビューしてからマージする。", "confidence": 0.95,
                         "subject": "マイグレーション", "category": "rule"},
                        {"text": "ログには structlog を使う。", "confidence": 0.95, "subject": "ログ", "category": "decision"},
                        {"text": "取り込みのタイムアウトの原因は接続プールの上限 (max_size=5) だった。", "confidence": 0.92,
                         "subject": "接続プール", "category": "bugfix"},
                    ],  # fmt: skip
                    "summary": {"request": "取り込みのタイムアウトを調査。", "done": ["接続プールの上限を引き上げた"],
                                "root_causes": ["接続プールの上限 (max_size=5) が小さすぎた"],
                                "next_steps": ["負荷テストを CI に追加する"]},  # fmt: skip
                },
            },
        ],
        "planted": [
            {"what": "rule: review migrations", "expect": ["マイグレーション", "レビュー"]},
            {"what": "decision: structlog", "expect": ["structlog"]},
            {"what": "root cause: pool size", "expect": ["接続プール", "5"]},
            {"what": "next step: load test in CI", "expect": ["負荷テスト"]},
        ],
        "probes": [{"prompt": "ログのライブラリは何を使っていますか？", "expect": ["structlog"]}],
    },
    {
        "name": "cli tool (English and Korean, a change of mind)",
        "project": "cli-tool",
        "sessions": [
            {
                "prompts": ["We use black for formatting. Can you tidy up cli/main.py?"],
                "tools": routine(10, bash("black cli/", "reformatted cli/main.py\nAll done! 1 file reformatted.")),
                "last": "Reformatted cli/main.py with black.",
                "claude": {
                    "facts": [{"text": "Code is formatted with black.", "confidence": 0.92, "subject": "code formatter",
                               "category": "convention"}],  # fmt: skip
                    "summary": {"request": "Tidy up cli/main.py.", "done": ["Reformatted cli/main.py with black"],
                                "root_causes": [], "next_steps": []},  # fmt: skip
                },
            },
            {
                "prompts": ["From now on we format with ruff format instead of black.",
                            "앞으로 릴리스 전에 항상 CHANGELOG를 업데이트해 주세요.",
                            "the test_config test fails randomly, look into it"],  # fmt: skip
                "tools": routine(
                    12,
                    bash("ruff format .", "3 files reformatted, 14 files left unchanged"),
                    bash("pytest -q tests/test_config.py -p no:randomly",
                         "FAILED tests/test_config.py::test_reload - FileExistsError: /tmp/cfg\n1 failed", code=1),  # fmt: skip
                ),
                "last": "The flaky test_config test is fixed: it was caused by a shared temp directory between tests; "
                "each test now gets its own tmp_path.\n\nStill to do: port the same fixture to the api tests.",
                "claude": {
                    "facts": [
                        {"text": "Format code with ruff format (not black).", "confidence": 0.95,
                         "subject": "code formatter", "category": "convention", "replaces": "black"},
                        {"text": "릴리스 전에는 항상 CHANGELOG를 업데이트한다.", "confidence": 0.95, "subject": "릴리스",
                         "category": "rule"},
                        {"text": "test_config was flaky because its tests shared one temp directory.",
                         "confidence": 0.92, "subject": "flaky config test", "category": "bugfix"},
                    ],  # fmt: skip
                    "summary": {"request": "Switch the formatter and fix the flaky config test.",
                                "done": ["Gave each config test its own tmp_path"],
                                "root_causes": ["test_config shared one temp directory between tests"],
                                "next_steps": ["Port the tmp_path fixture to the api tests"]},  # fmt: skip
                },
            },
        ],
        "planted": [
            {"what": "rule: ruff format (replaces black)", "expect": ["ruff format"]},
            {"what": "rule: changelog before release (Korean)", "expect": ["changelog", "릴리스"]},
            {"what": "root cause: shared temp dir", "expect": ["temp", "shared"]},
            {"what": "next step: port fixture to api tests", "expect": ["api tests"]},
        ],
        "stale": [["black for formatting"], ["formatted with black"]],
        "probes": [{"prompt": "how should I format the code before committing?", "expect": ["ruff format"]}],
    },
]


ROUTINE_LAST = [
    "All tests pass; committed as `chore: tidy imports`.",
    "Ran the suite again: 120 passed. Nothing else changed.",
    "Bumped the version to 2.3.1 and pushed the tag.",
    "Looked at the logs: nothing unusual.",
    "Renamed a few helpers in utils.py; the suite still passes.",
    "Updated the README's install section.",
]
ROUTINE_PROMPTS = [
    ["run the tests again please"],
    ["don't worry about the docs for now, just get the build green"],
    ["what's the git status?", "commit this with a sensible message"],
    ["stop the dev server and run the tests again"],
    ["tidy up utils.py a bit"],
    ["the install section of the README is outdated, fix it"],
]

SCENARIOS.append(
    {
        "name": "billing service (a long week: 1 session of news, 6 routine)",
        "project": "billing",
        "sessions": [
            {
                "prompts": ["Invoices for EU customers show the wrong VAT. Never hard-code tax rates: "
                            "they come from the rates table.",  # fmt: skip
                            "We use Postgres advisory locks rather than Redis locks for the invoice run."],
                "tools": routine(
                    16,
                    grep("VAT_RATE", ["billing/tax.py", "billing/legacy/rates.py"]),
                    bash("pytest -q tests/test_vat.py",
                         "FAILED tests/test_vat.py::test_de - AssertionError: assert Decimal('19.00') == Decimal('16.00')\n"
                         "1 failed", code=1),  # fmt: skip
                    edit("billing/tax.py", "VAT_RATE = 0.16", "rate = rates.lookup(country)"),
                ),
                "last": "VAT is right again for German invoices.\n\nRoot cause: billing/legacy/rates.py still "
                "hard-coded the 2020 temporary 16% rate and took precedence over the rates table.\n\n"
                "Next steps:\n- delete billing/legacy/rates.py once the March invoices are out",
                "claude": {
                    "facts": [
                        {"text": "Never hard-code tax rates; read them from the rates table.", "confidence": 0.95,
                         "subject": "tax rates", "category": "rule"},
                        {"text": "The invoice run takes Postgres advisory locks, not Redis locks.", "confidence": 0.95,
                         "subject": "invoice run locking", "category": "decision"},
                        {"text": "Wrong German VAT came from billing/legacy/rates.py hard-coding the temporary 16% rate.",
                         "confidence": 0.92, "subject": "VAT bug", "category": "bugfix"},
                    ],  # fmt: skip
                    "summary": {"request": "Fix the VAT on EU invoices.", "done": ["German VAT fixed (19%)"],
                                "root_causes": ["billing/legacy/rates.py hard-coded the temporary 16% rate"],
                                "next_steps": ["Delete billing/legacy/rates.py after the March invoices"]},  # fmt: skip
                },
            },
            *[
                {
                    "prompts": ROUTINE_PROMPTS[i],
                    "tools": routine(14 + i % 3, read("billing/utils.py", "def cents(x):\n    return int(x * 100)\n")),
                    "last": ROUTINE_LAST[i],
                    "claude": {"facts": [], "summary": {"request": ROUTINE_PROMPTS[i][0], "done": [ROUTINE_LAST[i]],
                                                        "root_causes": [], "next_steps": []}},  # fmt: skip
                }
                for i in range(6)
            ],
        ],
        "planted": [
            {"what": "rule: never hard-code tax rates", "expect": ["hard-code", "tax rate"]},
            {"what": "decision: Postgres advisory locks", "expect": ["advisory lock"]},
            {"what": "root cause: legacy 16% rate", "expect": ["legacy/rates.py", "16%"]},
            {"what": "next step: delete legacy rates after March", "expect": ["legacy/rates.py", "march"]},
        ],
        "probes": [
            {"prompt": "why was the VAT wrong on German invoices?", "expect": ["16%"]},
            {"prompt": "which lock does the invoice run use?", "expect": ["advisory"]},
        ],
    }
)
