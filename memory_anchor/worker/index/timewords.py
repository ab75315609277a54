"""The time window a query names: "on 8 May, 2023", "in May 2023", "last week", "昨天"...

One reader of time phrases for every part that needs one: search boosts the
records that happened in the window (a question may be asked long after), the
memory layers filter their events by it and search the rest of the query.

    window = time_window("what did we fix last week?")   # None when no phrase is found
    window.start, window.end                               # epoch seconds, end exclusive
    window.rest                                            # "what did we fix"

Days, weeks and months are the machine's local calendar: "yesterday" is the
user's yesterday. Dates written out (ISO 8601, "8 May 2023", "May 8, 2023",
"May 2023", "in 2023") win over relative phrases, since they say more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

MONTHS = {
    name: n
    for n, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")],
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30}


@dataclass(frozen=True)
class TimeWindow:
    start: float  # epoch seconds
    end: float  # epoch seconds, exclusive
    rest: str  # the query without the words that named the window


@dataclass(frozen=True)
class _Calendar:
    """Day, week and month starts around `now`, local time."""

    now: datetime

    @property
    def today(self) -> datetime:
        return self.now.replace(hour=0, minute=0, second=0, microsecond=0)

    @property
    def tomorrow(self) -> datetime:
        return self.today + timedelta(days=1)

    @property
    def week(self) -> datetime:
        return self.today - timedelta(days=self.today.weekday())

    @property
    def month(self) -> datetime:
        return self.today.replace(day=1)


_Reader = Callable[[re.Match, _Calendar], "tuple[datetime, datetime] | None"]


def _day(year: int, month: int, day: int) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(year, month, day)
    except ValueError:  # "31 February": not a date, not a window
        return None
    return start, start + timedelta(days=1)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    return datetime(year, month, 1), datetime(year + (month == 12), month % 12 + 1, 1)


def _last_n(m: re.Match, cal: _Calendar) -> tuple[datetime, datetime]:
    count = int(m["n"] or m["n2"])
    unit = _UNIT_DAYS[m["unit"].lower()] if m["unit"] else 1  # 最近N天 counts days
    return cal.today - timedelta(days=count * unit), cal.tomorrow


# (pattern, reader), tried in this order; the first that reads a window wins.
_PHRASES: list[tuple[re.Pattern, _Reader]] = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m, cal: _day(int(m[1]), int(m[2]), int(m[3]))),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH})\.?,?\s+(\d{{4}})\b", re.I),
     lambda m, cal: _day(int(m[3]), MONTHS[m[2].lower()], int(m[1]))),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I),
     lambda m, cal: _day(int(m[3]), MONTHS[m[1].lower()], int(m[2]))),
    (re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I), lambda m, cal: _month(int(m[2]), MONTHS[m[1].lower()])),
    (re.compile(r"\bin\s+(19\d\d|2[01]\d\d)\b", re.I), lambda m, cal: (datetime(int(m[1]), 1, 1), datetime(int(m[1]) + 1, 1, 1))),
    (re.compile(r"(?:\b(?:in\s+)?the\s+)?\b(?:last|past)\s+(?P<n>\d{1,3})\s+(?P<unit>day|week|month)s?\b|最近\s*(?P<n2>\d{1,3})\s*天", re.I),
     _last_n),
    (re.compile(r"\byesterday\b|昨天", re.I), lambda m, cal: (cal.today - timedelta(days=1), cal.today)),
    (re.compile(r"\btoday\b|\bthis morning\b|\bthis afternoon\b|今天|今日", re.I), lambda m, cal: (cal.today, cal.tomorrow)),
    (re.compile(r"\blast week\b|\bprevious week\b|上周|上个?星期", re.I), lambda m, cal: (cal.week - timedelta(days=7), cal.week)),
    (re.compile(r"\bthis week\b|本周|这周", re.I), lambda m, cal: (cal.week, cal.tomorrow)),
    (re.compile(r"\bpast week\b|\brecent(?:ly)?\b|最近", re.I), lambda m, cal: (cal.today - timedelta(days=7), cal.tomorrow)),
    (re.compile(r"\blast month\b|上个?月", re.I), lambda m, cal: ((cal.month - timedelta(days=1)).replace(day=1), cal.month)),
    (re.compile(r"\bthis month\b|本月|这个月", re.I), lambda m, cal: (cal.month, cal.tomorrow)),
]  # fmt: skip


def time_window(query: str, now: float | None = None) -> TimeWindow | None:
    """The window the first time phrase of `query` names (local time), or None."""
    cal = _Calendar(datetime.fromtimestamp(now) if now is not None else datetime.now())
    for pattern, read in _PHRASES:
        for match in pattern.finditer(query):
            window = read(match, cal)
            if window is not None:
                return TimeWindow(window[0].timestamp(), window[1].timestamp(), _without(query, match.group(0)))
    return None


def _without(query: str, phrase: str) -> str:
    rest = query.replace(phrase, " ")
    return re.sub(r"\s+", " ", rest).strip(" ?？.,")
