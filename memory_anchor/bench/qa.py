"""Questions about a project's past, asked the two ways a session asks memory.

A folder's `qa.jsonl` holds, one line a question: `q` (what a developer returning to the
project would ask), `any` (words of which one must appear in a retrieved item) and, where
given, `all` (words that must all appear in that same item), plus `kind` and the `session`
that established the answer (see shared/bench/replay/README.md). Each question goes:

- through per-prompt recall (what the UserPromptSubmit hook adds to the prompt): an item is
  one of the lines it injects;
- through search (`POST /api/v1/memories/search`, the project's top 10): an item is one hit,
  its title and text.

Recall must also stay quiet when memory holds no answer. `ABSENT` (and, for a set asked in a CJK
script, `ABSENT_ZH`) are questions about work no dev set's project did (infrastructure, billing,
mobile builds): whatever recall injects for them is a false recall. They are asked of every set
alike, so they fit none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from memory_anchor.worker.store.cjk import written_in_cjk

GOALS = {"qa_recall": 0.50, "qa_search": 0.85, "absent_quiet": 0.80}
# Questions whose answers no set's project holds; recall should add nothing to them.
ABSENT = (
    "how did we configure the kubernetes ingress for the staging cluster?",
    "why did we pick stripe over paddle for the subscription billing?",
    "what was wrong with the android release build when gradle failed to sign it?",
    "where is the terraform state for the production account kept?",
    "how do we rotate the redis cluster passwords?",
    "what did we decide about the graphql federation gateway?",
    "why did the ios push notifications stop arriving last month?",
    "which kafka topics does the billing consumer read from?",
    "how did we fix the memory leak in the unity game's asset loader?",
    "what was the outcome of the salesforce crm migration?",
)
# The same, as a Chinese-speaking person asks them: a set whose questions are in a CJK script is asked
# these too, since recall reads a CJK prompt by its words (context/recall.py, subject_said).
ABSENT_ZH = (
    "我们当时是怎么给预发布集群配置 kubernetes ingress 的？",
    "订阅计费为什么选了 stripe 而不是 paddle？",
    "gradle 签名失败的时候，安卓发布构建出了什么问题？",
    "生产账号的 terraform 状态存在哪里？",
    "redis 集群的密码怎么轮换？",
    "graphql 联邦网关我们最后怎么定的？",
    "上个月 iOS 推送通知为什么收不到了？",
    "计费消费者读的是哪些 kafka 主题？",
    "unity 游戏资源加载器的内存泄漏是怎么修的？",
    "salesforce CRM 迁移最后结果怎么样？",
)


@dataclass
class Question:
    q: str
    any: list[str]
    all: list[str] = field(default_factory=list)
    kind: str = ""
    session: str = ""


def read_questions(folder: Path) -> list[Question]:
    path = folder / "qa.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Question(row["q"], list(row.get("any") or []), list(row.get("all") or []), row.get("kind") or "",
                                row.get("session") or ""))  # fmt: skip
    return out


def answers(item: str, question: Question) -> bool:
    """Whether one retrieved item carries the answer: one of `any` and every one of `all`, case aside."""
    text = item.lower()
    return any(w.lower() in text for w in question.any) and all(w.lower() in text for w in question.all)


def recall_items(context: str) -> list[str]:
    """The memories recall injected: its "- " lines."""
    return [line for line in context.splitlines() if line.startswith("- ")]


def search_items(results: list[dict[str, Any]]) -> list[str]:
    # The REST answer is mem0's shape: a record's text is its `memory`.
    return [f"{hit.get('title') or ''}\n{hit.get('memory') or hit.get('text') or ''}" for hit in results]


def measure(questions: list[Question], recall: Callable[[str], str], search: Callable[[str], list[dict[str, Any]]]) -> dict[str, Any]:
    """Ask each question through `recall` (prompt -> injected context) and `search` (query -> top 10 hits);
    then the absent questions through recall."""
    rows = []
    for question in questions:
        context = recall(question.q)
        hits = search(question.q)
        items = search_items(hits)
        rank = next((i + 1 for i, item in enumerate(items) if answers(item, question)), None)
        rows.append({"q": question.q, "kind": question.kind, "recall": any(answers(i, question) for i in recall_items(context)),
                     "search": rank is not None, "rank": rank, "recall_lines": len(recall_items(context)),
                     "search_top": [(hit.get("kind"), (hit.get("title") or hit.get("text") or "")[:90]) for hit in hits[:3]]})  # fmt: skip
    asked_in_cjk = any(written_in_cjk(q.q) for q in questions)
    absent = [{"q": q, "lines": recall_items(recall(q))} for q in ABSENT + (ABSENT_ZH if asked_in_cjk else ())]
    figures: dict[str, Any] = {"questions": rows, "absent": absent}
    if rows:
        figures["qa_recall"] = sum(r["recall"] for r in rows) / len(rows)
        figures["qa_search"] = sum(r["search"] for r in rows) / len(rows)
        figures["recall_silent"] = sum(r["recall_lines"] == 0 for r in rows)
    figures["absent_quiet"] = sum(not a["lines"] for a in absent) / len(absent)
    return figures


def goals(figures: dict[str, Any]) -> dict[str, tuple[Any, str, bool]]:
    rows: dict[str, tuple[Any, str, bool]] = {}
    if figures.get("questions"):
        n = len(figures["questions"])
        for key, name in (("qa_recall", "questions answered by recall"), ("qa_search", "questions answered in search top 10")):
            got = round(figures[key] * n)
            rows[name] = (f"{got}/{n}", f">= {GOALS[key]:.0%}", figures[key] >= GOALS[key])
    quiet = figures["absent_quiet"]
    rows["recall quiet on absent answers"] = (f"{quiet:.0%}", f">= {GOALS['absent_quiet']:.0%}", quiet >= GOALS["absent_quiet"])
    return rows


def report(figures: dict[str, Any]) -> None:
    rows = figures["questions"]
    if rows:
        print(f"\nquestions (qa.jsonl): {len(rows)}; answered by recall {sum(r['recall'] for r in rows)}, "
              f"in search's top 10 {sum(r['search'] for r in rows)}; recall silent on {figures['recall_silent']}")  # fmt: skip
        kinds = sorted({r["kind"] for r in rows})
        for kind in kinds:
            mine = [r for r in rows if r["kind"] == kind]
            print(f"  {kind or '-':12} recall {sum(r['recall'] for r in mine)}/{len(mine)}, search {sum(r['search'] for r in mine)}/{len(mine)}")
        for row in rows:
            if not (row["recall"] and row["search"]):
                which = " and ".join(name for name in ("recall", "search") if not row[name])
                print(f"  missed by {which}: {row['q']}")
                if not row["search"]:
                    for kind, head in row["search_top"]:
                        print(f"      top: [{kind}] {head!r}")
    absent = figures["absent"]
    loud = [a for a in absent if a["lines"]]
    print(f"questions whose answer memory lacks: recall quiet on {len(absent) - len(loud)} of {len(absent)}")
    for row in loud:
        print(f"  recalled for {row['q']!r}:")
        for line in row["lines"][:3]:
            print(f"      {line[:140]}")
