"""Time phrases in queries: one reader for search's date boost and the memory layers' event filter."""

from __future__ import annotations

from datetime import datetime

import pytest

from memory_anchor.worker.index.timewords import time_window

# A Wednesday, local time: the week started on Monday 18 March.
NOW = datetime(2024, 3, 20, 15, 30).timestamp()


def _local(window) -> tuple[str, str]:
    fmt = "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(window.start).strftime(fmt), datetime.fromtimestamp(window.end).strftime(fmt)


@pytest.mark.parametrize(
    "query,start,end,rest",
    [
        ("what happened in May 2023", "2023-05-01", "2023-06-01", "what happened in"),
        ("what did we do on 8 May, 2023?", "2023-05-08", "2023-05-09", "what did we do on"),
        ("the meeting of May 8th, 2023", "2023-05-08", "2023-05-09", "the meeting of"),
        ("deploy log 2023-05-08", "2023-05-08", "2023-05-09", "deploy log"),
        ("what shipped in 2022", "2022-01-01", "2023-01-01", "what shipped"),
        ("what did we do yesterday", "2024-03-19", "2024-03-20", "what did we do"),
        ("what did we fix today?", "2024-03-20", "2024-03-21", "what did we fix"),
        ("What did we finish last week?", "2024-03-11", "2024-03-18", "What did we finish"),
        ("anything this week", "2024-03-18", "2024-03-21", "anything"),
        ("what changed recently", "2024-03-13", "2024-03-21", "what changed"),
        ("bugs from last month", "2024-02-01", "2024-03-01", "bugs from"),
        ("in the last 3 days what broke", "2024-03-17", "2024-03-21", "what broke"),
        ("errors over the past 2 weeks", "2024-03-06", "2024-03-21", "errors over"),
        ("昨天修了什么", "2024-03-19", "2024-03-20", "修了什么"),
        ("最近3天的部署", "2024-03-17", "2024-03-21", "的部署"),
    ],
)
def test_phrases_name_local_windows(query, start, end, rest):
    window = time_window(query, NOW)
    assert window is not None
    assert _local(window) == (start + " 00:00", end + " 00:00")
    assert window.rest == rest


def test_a_written_date_wins_over_a_relative_phrase():
    window = time_window("what did she start recently, as mentioned on 3 June, 2023?", NOW)
    assert _local(window) == ("2023-06-03 00:00", "2023-06-04 00:00")


def test_no_phrase_no_window():
    assert time_window("nothing temporal here", NOW) is None
    assert time_window("the 2023-13-45 build id is not a date", NOW) is None
    assert time_window("", NOW) is None
