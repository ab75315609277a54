"""Scoring the rules memory briefs against a reader's labels of every user prompt (bench replay --labels).

The labels of a real corpus stay beside its transcripts, out of this repository; these
prompts are written here to show how a rule is traced to the prompt it came from and how
precision and recall are counted, per half of the corpus.
"""

from __future__ import annotations

import json

import pytest

from memory_anchor.bench.rule_labels import read_labels, said_in, score


def _labels(tmp_path, rows):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return read_labels(path)


ROWS = [
    {"session": "s1", "prompt": "never make manual changes to generated files", "label": "standing", "half": "dev"},
    {"session": "s1", "prompt": "fix the flaky login test", "label": "not", "half": "dev"},
    {"session": "s2", "prompt": "I'm not a fan of the catppuccin theme, maybe tokyo night?", "label": "borderline", "half": "check"},
    {"session": "s2", "prompt": "stop making changes without checking with me first", "label": "standing", "half": "check"},
    {"session": "s2", "prompt": "lets use createdAt", "label": "not", "half": "check"},
]  # fmt: skip


def test_a_rule_comes_from_the_prompt_that_holds_most_of_its_words():
    assert said_in("never make manual changes to generated files", "ugh never make manual changes to generated files fffs")
    assert not said_in("always run the linter before you push", "never make manual changes to generated files")


def test_precision_and_recall_in_all_and_per_half(tmp_path):
    labels = _labels(tmp_path, ROWS)
    rules = [
        {"text": "- rule: never make manual changes to generated files (fact 1a2b3c4d)",
         "quote": "never make manual changes to generated files", "session": "s1"},
        {"text": "- decision: lets use createdAt (fact 5e6f7a8b)", "quote": "lets use createdAt", "session": "s2"},
        {"text": "- preference: I'm not a fan of the catppuccin theme", "quote": None, "session": "s2"},
    ]  # fmt: skip
    every = score(labels, rules)
    assert [row["label"] for row in every["rules"]] == ["standing", "not", "borderline"]
    assert every["precision"] == pytest.approx(2 / 3)
    assert (every["standing_reached"], every["standing"], every["genuine_reached"], every["genuine"]) == (1, 2, 2, 3)
    dev, check = score(labels, rules, "dev"), score(labels, rules, "check")
    assert (len(dev["rules"]), dev["precision"], dev["standing_reached"], dev["standing"]) == (1, 1.0, 1, 1)
    assert (len(check["rules"]), check["precision"], check["standing_reached"], check["standing"]) == (2, 0.5, 0, 1)


def test_listing_nothing_has_no_precision_and_no_recall(tmp_path):
    figures = score(_labels(tmp_path, ROWS), [])
    assert figures["precision"] is None and figures["standing_reached"] == 0


def test_a_label_that_is_no_label_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"session": "s", "prompt": "p", "label": "standng"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"labels.jsonl:1: label 'standng'"):
        read_labels(path)


def test_the_users_instructions_by_keywords_score_every_line_under_an_instructions_heading(tmp_path):
    """labels.json: a reader listed the user's instructions, each with keywords; a briefed line is genuine
    when it carries the first two of one of them, whichever section shows it."""
    from memory_anchor.bench.rule_labels import Instructions, instruction_lines, score_instructions

    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"source": "test", "rules": [
        {"id": "r1", "kind": "rule", "canonical": "Handoff updates the wiki", "keywords": ["handoff", "wiki"]},
        {"id": "r2", "kind": "decision", "canonical": "Postgres runs in docker", "keywords": ["postgres", "docker", "compose"]},
    ]}), encoding="utf-8")  # fmt: skip
    labels = read_labels(path)
    assert isinstance(labels, Instructions) and [i.id for i in labels.items] == ["r1", "r2"]
    briefing = "\n".join([
        "# Memory Anchor", "## Standing rules and decisions", "- decision: lets move to phase 4 (fact 1)",
        "## Instructions the user gave once (their own words)", '- "make sure that Handoff updates the wiki" (said once)',
        "## Recent activity", "- the handoff touched the wiki page",
    ])  # fmt: skip
    lines = instruction_lines(briefing)
    assert lines == ["- decision: lets move to phase 4 (fact 1)", '- "make sure that Handoff updates the wiki" (said once)']
    figures = score_instructions(labels, [{"text": line} for line in lines])
    assert [row["label"] for row in figures["rules"]] == ["not", "genuine r1"]
    assert (figures["precision"], figures["standing_reached"], figures["standing"]) == (0.5, 1, 2)


def test_an_instruction_without_two_keywords_is_an_error(tmp_path):
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"rules": [{"id": "r1", "keywords": ["handoff"]}]}), encoding="utf-8")
    with pytest.raises(ValueError, match="r1 needs two keywords"):
        read_labels(path)
