"""The store's `?` placeholders, as psycopg's `%s`.

The store's SQL is written once, with SQLite's `?`. psycopg formats a query
with parameters itself: `%s` marks a parameter and a literal `%` must be
doubled, wherever it stands (psycopg does not parse SQL quoting). A `?`
inside a quoted string, a quoted identifier or a `--` comment is text, not a
parameter (and the store uses none of jsonb's `?` operators). Run only on
queries sent with parameters: without them psycopg does no formatting.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def to_psycopg(sql: str) -> str:
    """`sql` with each `?` outside quotes and comments as `%s`, and each `%` as `%%`."""
    out: list[str] = []
    quote = ""  # the quote character we are inside, if any
    comment = False  # inside a `--` comment, up to the end of the line
    previous = ""
    for char in sql:
        if char == "%":
            out.append("%%")
        elif comment:
            comment = char != "\n"
            out.append(char)
        elif quote:
            # A doubled quote ('it''s') closes and reopens: the state comes out right.
            if char == quote:
                quote = ""
            out.append(char)
        elif char in ("'", '"'):
            quote = char
            out.append(char)
        elif char == "-" and previous == "-":
            comment = True
            out.append(char)
        else:
            out.append("%s" if char == "?" else char)
        previous = char
    return "".join(out)
