"""How many of the user's genuine standing instructions memory briefs, and how many of its rules are genuine.

`memory-anchor bench replay DIR --labels FILE` scores the standing rules, decisions and
preferences memory drew from a folder of real transcripts against a reader's labels. What
counts as briefed: every `- ` line under a `## ` heading of the briefing that says rules,
decisions, preferences or instructions (`instruction_lines`), whatever else the line says
(confirmed or marked as said once). Labels files are kept beside the transcripts, never in
this repository (they quote their users), in one of two forms.

**The user's instructions by keywords** (one JSON object, e.g. `labels.json`): a reader
read every prompt and listed the standing instructions and decisions the user gave:

    {"source": "...", "rules": [{"id": "r3", "kind": "rule", "canonical": "<the instruction, reworded>",
                                 "keywords": ["handoff", "siyuan", ...]}, ...]}

A briefed line is genuine when it carries (as lower-case substrings) the first two keywords
of a listed instruction, and that instruction is then reached. Precision: the share of
briefed lines that are genuine; recall: the share of listed instructions reached.

**Every prompt labelled** (JSON Lines), one line a prompt:

    {"session": "<session id>", "prompt": "<the prompt as typed>", "label": "standing" | "borderline" | "not",
     "half": "dev" | "check"}

- `standing`: a lasting instruction, decision or preference the user gave ("never edit
  generated files", "we view signedAt as the contract's start until told otherwise");
- `borderline`: one a careful reader could take either way (a convention stated in
  passing, a choice that may hold beyond the task);
- `not`: anything else (a task, a question, an answer, pasted material).
- `half` (optional): which half of the corpus the prompt is in, so a change tuned on one
  half can be checked on the other (overfitting shows as a gap between them).

A rule counts as coming from a prompt when most of the words of the user's sentence it
stands on (its quote, else its own text) are in that prompt. Precision: the share of
briefed rules that come from a standing or borderline prompt. Recall: the share of
standing prompts (and of standing-or-borderline ones) that a briefed rule comes from.
Pure functions: reading memory is replay.py's part.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABELS = ("standing", "borderline", "not")
GENUINE = ("standing", "borderline")
SAID_IN = 0.8  # of a quote's words, in the prompt it came from


@dataclass
class Label:
    session: str
    prompt: str
    label: str
    half: str = ""


@dataclass
class Instruction:
    """One standing instruction or decision a reader found in the user's prompts, known by its keywords."""

    id: str
    kind: str
    canonical: str
    keywords: list[str]

    def carried_by(self, text: str) -> bool:
        lowered = (text or "").lower()
        return all(word.lower() in lowered for word in self.keywords[:2])


@dataclass
class Instructions:
    """A labels file of the keywords form: the user's standing instructions, each by its keywords."""

    source: str
    items: list[Instruction]


_HEADING_SAYS = re.compile(r"(?i)\b(?:rules?|decisions?|preferences?|instructions?)\b")


def instruction_lines(briefing: str) -> list[str]:
    """The `- ` lines under every `## ` heading that says rules, decisions, preferences or instructions:
    what the briefing shows as the user's instructions, however it marks them."""
    out, counted = [], False
    for line in briefing.splitlines():
        if line.startswith("## "):
            counted = bool(_HEADING_SAYS.search(line))
        elif line.startswith("- ") and counted:
            out.append(line)
    return out


def read_labels(path: Path) -> list[Label] | Instructions:
    """The labels file, of either form; a line that is not a label is an error naming it (a typo must not pass as 'not')."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and "rules" in whole:
        return _read_instructions(path, whole)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            label = Label(str(row["session"]), str(row["prompt"]), str(row["label"]), str(row.get("half") or ""))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a label line ({exc})") from exc
        if label.label not in LABELS:
            raise ValueError(f"{path}:{number}: label {label.label!r} is none of {', '.join(LABELS)}")
        out.append(label)
    return out


def _read_instructions(path: Path, whole: dict[str, Any]) -> Instructions:
    items = []
    for number, row in enumerate(whole["rules"], 1):
        try:
            keywords = [str(word) for word in row["keywords"]]
            item = Instruction(str(row["id"]), str(row.get("kind") or ""), str(row.get("canonical") or ""), keywords)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: rule {number} is not an instruction with keywords ({exc})") from exc
        if len(keywords) < 2:
            raise ValueError(f"{path}: rule {item.id} needs two keywords at least, has {keywords}")
        items.append(item)
    return Instructions(str(whole.get("source") or ""), items)


def score_instructions(instructions: Instructions, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """Precision and recall of briefed `rules` ({text, ...}: text as the briefing shows it) against
    the user's instructions by keywords; the same figures `score` gives, so `report` prints either."""
    rows = []
    reached: set[str] = set()
    for rule in rules:
        carried = [item.id for item in instructions.items if item.carried_by(rule.get("line") or rule.get("text") or "")]
        reached.update(carried)
        rows.append({**rule, "label": "genuine " + ",".join(carried) if carried else "not", "prompt": None})
    good = sum(row["label"] != "not" for row in rows)
    total = len(instructions.items)
    return {"rules": rows, "precision": good / len(rows) if rows else None, "genuine_rules": good,
            "standing": total, "standing_reached": len(reached), "genuine": total, "genuine_reached": len(reached),
            "prompts": total, "reached": sorted(reached, key=lambda i: (len(i), i))}  # fmt: skip


def _words(text: str) -> list[str]:
    return re.findall(r"\w{2,}", (text or "").lower())


def said_in(quote: str, prompt: str) -> bool:
    """Most of the quote's words are in the prompt (a rule stands on a sentence of it)."""
    words = _words(quote)
    if not words:
        return False
    said = set(_words(prompt))
    return sum(w in said for w in words) >= SAID_IN * len(words)


def source_of(rule: dict[str, Any], labels: list[Label]) -> Label | None:
    """The labelled prompt a rule came from: its own session's first, else any session's."""
    quote = rule.get("quote") or rule.get("text") or ""
    same = [label for label in labels if label.session == rule.get("session")]
    return next((label for label in same + labels if said_in(quote, label.prompt)), None)


def score(labels: list[Label], rules: list[dict[str, Any]], half: str | None = None) -> dict[str, Any]:
    """Precision and recall of `rules` ({text, quote, session}) against the labels (of one half, if given)."""
    scoped = [label for label in labels if half is None or label.half == half]
    rows = []
    for rule in rules:
        source = source_of(rule, labels)
        if half is not None and (_session_half(rule, labels) or (source.half if source else None)) != half:
            continue
        rows.append({**rule, "label": source.label if source else "unmatched", "prompt": source.prompt if source else None})
    reached = {id(label) for rule in rows for label in scoped if said_in(rule.get("quote") or rule.get("text") or "", label.prompt)}
    standing = [label for label in scoped if label.label == "standing"]
    genuine = [label for label in scoped if label.label in GENUINE]
    good = sum(row["label"] in GENUINE for row in rows)
    return {
        "rules": rows,
        "precision": good / len(rows) if rows else None,
        "genuine_rules": good,
        "standing": len(standing),
        "standing_reached": sum(id(label) in reached for label in standing),
        "genuine": len(genuine),
        "genuine_reached": sum(id(label) in reached for label in genuine),
        "prompts": len(scoped),
    }


def _session_half(rule: dict[str, Any], labels: list[Label]) -> str | None:
    return next((label.half for label in labels if label.session == rule.get("session")), None)


def recall(figures: dict[str, Any], which: str = "standing") -> float | None:
    total = figures[which]
    return figures[f"{which}_reached"] / total if total else None


def report(name: str, briefed: dict[str, Any], pending: dict[str, Any]) -> None:
    """Print one scope's figures: the briefed rules with their verdicts, then those waiting for approval."""

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.0%}"

    if "reached" in briefed:  # the keywords form: the instructions themselves are the labels
        print(f"\n{name}: {briefed['standing']} standing instructions of the user")
        for title, figures in (("briefed", briefed), ("pending (said once, or waiting for approval)", pending)):
            print(f"  {title}: {len(figures['rules'])} lines, {figures['genuine_rules']} genuine (precision "
                  f"{pct(figures['precision'])}); instructions reached {figures['standing_reached']}/"
                  f"{figures['standing']} ({pct(recall(figures))}): {', '.join(figures['reached']) or 'none'}")  # fmt: skip
            for row in figures["rules"]:
                print(f"    [{row['label']}] {row['text'][:220]!r}")
        return
    print(f"\n{name}: {briefed['prompts']} labelled prompts, {briefed['standing']} standing instructions "
          f"({briefed['genuine']} with borderline ones)")  # fmt: skip
    for title, figures in (("briefed", briefed), ("waiting for approval", pending)):
        print(f"  {title}: {len(figures['rules'])} rules, {figures['genuine_rules']} genuine (precision "
              f"{pct(figures['precision'])}); standing instructions reached {figures['standing_reached']}/"
              f"{figures['standing']} ({pct(recall(figures))}), with borderline {figures['genuine_reached']}/"
              f"{figures['genuine']} ({pct(recall(figures, 'genuine'))})")  # fmt: skip
        for row in figures["rules"]:
            print(f"    [{row['label']}] {row['text'][:150]!r}")
