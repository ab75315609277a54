"""The `llm_usage` table: tokens and calls spent on Claude per day, against the daily budget."""

from __future__ import annotations

from typing import Any


def usage_on(conn: Any, day: str) -> dict[str, int]:
    row = conn.execute("SELECT input_tokens, output_tokens, calls FROM llm_usage WHERE day = ?", (day,)).fetchone()
    if row is None:
        return {"input_tokens": 0, "output_tokens": 0, "calls": 0}
    return {"input_tokens": row[0], "output_tokens": row[1], "calls": row[2]}


def add_call(conn: Any, day: str, input_tokens: int, output_tokens: int) -> None:
    conn.execute(
        """INSERT INTO llm_usage(day, input_tokens, output_tokens, calls) VALUES (?, ?, ?, 1)
           ON CONFLICT(day) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
           output_tokens = output_tokens + excluded.output_tokens, calls = calls + 1""",
        (day, input_tokens, output_tokens),
    )
