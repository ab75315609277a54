"""How many of the user's genuine standing instructions memory briefs, and how many of its rules are genuine.

`memory-anchor bench replay DIR --labels FILE` scores the standing rules, decisions and
preferences memory drew from a folder of real transcripts against a reader's labels of
every user prompt in it. The labels file (JSON Lines, kept beside the transcripts, never
in this repository: it quotes their users) has one line a prompt:

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


def read_labels(path: Path) -> list[Label]:
    """The labels file's lines; a line that is not a label is an error naming it (a typo must not pass as 'not')."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
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

    print(f"\n{name}: {briefed['prompts']} labelled prompts, {briefed['standing']} standing instructions "
          f"({briefed['genuine']} with borderline ones)")  # fmt: skip
    for title, figures in (("briefed", briefed), ("waiting for approval", pending)):
        print(f"  {title}: {len(figures['rules'])} rules, {figures['genuine_rules']} genuine (precision "
              f"{pct(figures['precision'])}); standing instructions reached {figures['standing_reached']}/"
              f"{figures['standing']} ({pct(recall(figures))}), with borderline {figures['genuine_reached']}/"
              f"{figures['genuine']} ({pct(recall(figures, 'genuine'))})")  # fmt: skip
        for row in figures["rules"]:
            print(f"    [{row['label']}] {row['text'][:150]!r}")
