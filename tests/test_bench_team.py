"""`memory-anchor bench team` runs end to end (a small n) and prints every figure it promises.

Real PostgreSQL (a throwaway cluster the bench starts itself), three real workers
and one on SQLite. Timings are not asserted: only that each figure is a number
and that no event posted while the database was down went missing.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

from memory_anchor.bench.postgres_cluster import find_bin_dir
from memory_anchor.cli.main import build_parser
from tests.postgres import unavailable

NUMBER = r"[\d,]+(?:\.\d+)?"
FIGURES = {
    "PostgreSQL write throughput": rf"{NUMBER} memories/s",
    "PostgreSQL visibility lag": rf"p50 {NUMBER} ms / p95 {NUMBER} ms .* 0 not found",
    "PostgreSQL filtered search": rf"p50 {NUMBER} ms / p95 {NUMBER} ms",
    "PostgreSQL lost while down": r"lost = 0 .* (\d+) posted, \1 got 202",
    "SQLite write throughput": rf"{NUMBER} memories/s",
    "SQLite filtered search": rf"p50 {NUMBER} ms / p95 {NUMBER} ms",
}


def test_team_bench_prints_every_figure_and_loses_nothing(tmp_path):
    if find_bin_dir() is None:
        unavailable("none found")
    args = build_parser().parse_args(
        ["bench", "team", "--n", "120", "--probes", "3", "--events", "5", "--queries", "10", "--work-dir", str(tmp_path)]
    )
    out = io.StringIO()
    with redirect_stdout(out):
        assert args.handler(args) == 0
    text = out.getvalue()
    lines = {line.split("  ")[0]: line for line in text.splitlines()}
    for label, pattern in FIGURES.items():
        assert label in lines, text
        assert re.search(pattern, lines[label]), lines[label]
    assert "bulk loaded through the workers' mem0 API" in text
