"""`memory-anchor bench search` runs end to end (a small n) and prints each search's figures on both backends.

Real PostgreSQL (a throwaway cluster the bench starts itself) and a SQLite data
dir, in process. Timings are not asserted: only that every row has a p50 / p95
for SQLite and for PostgreSQL.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

from memory_anchor.bench.postgres_cluster import find_bin_dir
from memory_anchor.cli.main import build_parser
from tests.postgres import unavailable

FIGURE = r"[\d.]+ / [\d.]+ ms"
ROWS = ("keyword, no filter", "keyword, project + user", "hybrid, no filter", "hybrid, project + user")


def test_search_bench_prints_each_search_on_both_backends(tmp_path):
    if find_bin_dir() is None:
        unavailable("none found")
    args = build_parser().parse_args(["bench", "search", "--n", "100", "--queries", "5", "--work-dir", str(tmp_path)])
    out = io.StringIO()
    with redirect_stdout(out):
        assert args.handler(args) == 0
    text = out.getvalue()
    assert re.search(r"SQLite\s+PostgreSQL", text), text
    for label in ROWS:
        line = next((line for line in text.splitlines() if line.startswith(label + " ")), None)
        assert line is not None, text
        assert re.fullmatch(rf"{re.escape(label)}\s+{FIGURE}\s+{FIGURE}\s*", line), line
