"""Time ranges named in a query: "today", "yesterday", "last week", "this month",
"in the last 3 days", and the Chinese 今天/昨天/本周/上周/最近.

Returned as (start, end) epoch seconds in local time, plus the query without the
phrase, so that "what did we fix today" searches "what did we fix" among today's
events. Unknown phrasing leaves the range open.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_N_DAYS = re.compile(r"\b(?:in\s+)?the\s+(?:last|past)\s+(\d{1,3})\s+days?\b|最近\s*(\d{1,3})\s*天", re.I)


def _day_start(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def time_range_in(query: str, now: float | None = None) -> tuple[float | None, float | None, str]:
    """(start, end, rest of the query) for the first time phrase found in `query`."""
    current = datetime.fromtimestamp(now) if now is not None else datetime.now()
    today = _day_start(current)
    week_start = today - timedelta(days=today.weekday())
    month_start = today.replace(day=1)
    prev_month_start = (month_start - timedelta(days=1)).replace(day=1)
    end_now = current.timestamp() + 1

    match = _N_DAYS.search(query)
    if match:
        days = int(match.group(1) or match.group(2))
        return (today - timedelta(days=days)).timestamp(), end_now, _strip(query, match.group(0))

    phrases: list[tuple[str, datetime, datetime | None]] = [
        (r"\byesterday\b|昨天", today - timedelta(days=1), today),
        (r"\btoday\b|\bthis morning\b|\bthis afternoon\b|今天|今日", today, None),
        (r"\blast week\b|\bprevious week\b|上周|上个?星期", week_start - timedelta(days=7), week_start),
        (r"\bthis week\b|本周|这周", week_start, None),
        (r"\bpast week\b|\brecent(?:ly)?\b|最近", today - timedelta(days=7), None),
        (r"\blast month\b|上个?月", prev_month_start, month_start),
        (r"\bthis month\b|本月|这个月", month_start, None),
    ]
    for pattern, start, end in phrases:
        found = re.search(pattern, query, re.I)
        if found:
            return start.timestamp(), (end.timestamp() if end else end_now), _strip(query, found.group(0))
    return None, None, query


def _strip(query: str, phrase: str) -> str:
    rest = query.replace(phrase, " ")
    return re.sub(r"\s+", " ", rest).strip(" ?？.,")
