"""`bench staleness --quick` in the default suite: the issue's targets on two scripted git histories.

The histories (memory_anchor/bench/staleness.py) give every file a sessions read
or edited a fate: untouched, changed on a branch never merged and changed back
(the fresh controls), and changed, deleted, renamed, merged from a branch, left
uncommitted, rewritten, reverted (stale); next steps are done by commits in
their own words, half done, done on another file or branch, or not at all.
Everything goes through a real worker: its hook-event door, `POST /api/v1/verify`
and the next briefing. The time the checks add to SessionStart is printed, not
asserted (durations belong in the bench: `memory-anchor bench staleness`).
"""

from __future__ import annotations

from memory_anchor.bench import staleness


def test_quick_bench_meets_the_targets(tmp_path, capsys):
    figures = staleness.measure(tmp_path, projects=2, memories=100, briefing_runs=5)
    with capsys.disabled():
        staleness.print_figures(figures)
    assert staleness.meets_goals(figures, timing=False) == []
    # every fate and kind is in the run, so a fate nobody checks cannot hide
    assert {name.split("/")[1] for name in figures["by_fate"]} >= set(staleness.READ_FATES) | set(staleness.EDIT_FATES)
    assert {name.split("/")[0] for name in figures["by_fate"]} == {"observation", "summary", "fact"}
    assert figures["unchecked"] == 0 and figures["steps_unlisted"] == []
    assert figures["briefing"]["marked_lines"] > 0  # the timed briefing did check and mark
