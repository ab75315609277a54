"""`memory-anchor bench spine|session|ingest|locomo|multilingual|scale|branches|vectors|redaction|team|search|context|staleness|replay`: benchmarks that print figures."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

BENCHES = {
    "branches": "search p50/p95 on a branch 3 levels deep and at an as_of point, next to main",
    "spine": "hook wall time, capture rate, search and context latency, worker RSS",
    "locomo": "LoCoMo turn-level recall@5/10/20: default, BM25-only and dense-only search",
    "multilingual": "top-1/top-5 in Chinese (the seeds' checklists), Japanese, Korean, German, Spanish; latency, ingest, RSS",
    "scale": "ingest time, search p50/p95 (filters, branches), RSS and disk at N memories",
    "vectors": "in-process vector index: search time and shortlist recall against exact scoring",
    "session": "Claude Code sessions with and without the plugin: medians, ratio, per-hook times, bridge RSS",
    "ingest": "mem0 adds: memories per second one per add (1 and 4 clients) and in adds of 50, until searchable",
    "redaction": "secret redaction on ordinary text: false positives per MB, MB/s, payloads sanitized per second",
    "team": "three workers on one PostgreSQL: write throughput, visibility lag, filtered search, nothing lost while down; SQLite beside it",
    "search": "keyword and hybrid search in process at N memories, with and without filters: SQLite beside PostgreSQL",
    "context": "next-session briefing: planted rules/decisions/root causes/next steps found, repeats, tokens, recall",
    "replay": "a folder of real transcripts imported: the rules briefed and their sources, next steps, facts, "
              "its qa.jsonl questions answered by recall and search, "
    "recall and search naming the changed files, briefing size, import time, worker RSS",
    "staleness": "memories about code after scripted git histories: stale marked, fresh wrongly marked, next steps "
                 "closed by commits, time added to SessionStart",
}


def register(sub) -> None:
    bench = sub.add_parser("bench", help="run a benchmark and print its figures")
    which = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    spine = which.add_parser("spine", help=BENCHES["spine"])
    spine.add_argument("--memories", type=int, default=10_000, help="memories stored before searching")
    spine.add_argument(
        "--observations", type=int, default=10_000,
        help="PostToolUse events posted (the capture rate), then distilled into observations (the context figure)",
    )  # fmt: skip
    spine.add_argument("--clients", type=int, default=8, help="concurrent clients posting events")
    spine.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dir here")
    spine.set_defaults(handler=_runner("spine"))

    locomo = which.add_parser("locomo", help=BENCHES["locomo"])
    locomo.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file (e.g. shared/bench/locomo-dev.json)")
    locomo.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    locomo.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dir here")
    locomo.add_argument("--in-process", action="store_true", help="skip HTTP (tuning only; not the measure)")
    locomo.add_argument("--storage-url", default=None,
                        help="in process, on this team database (postgresql://MEMBER@HOST/DB, after storage init)")
    locomo.set_defaults(handler=_runner("locomo"))

    multilingual = which.add_parser("multilingual", help=BENCHES["multilingual"])
    multilingual.add_argument("--locomo", type=Path, default=None, help="also English LoCoMo R@10 on this file (e.g. ../shared/bench/locomo-dev.json)")
    multilingual.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dir here")
    multilingual.set_defaults(handler=_runner("multilingual"))

    scale = which.add_parser("scale", help=BENCHES["scale"])
    scale.add_argument("--n", type=int, default=100_000, help="memories to store")
    scale.add_argument("--queries", type=int, default=300, help="searches per measured configuration")
    scale.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dir here")
    scale.add_argument("--reuse", action="store_true", help="search-only re-run over --work-dir's data from an earlier run")
    scale.set_defaults(handler=_runner("scale"))

    branches = which.add_parser("branches", help=BENCHES["branches"])
    branches.add_argument("--memories", type=int, action="append", help="memories stored (repeatable; default 10000 and 100000)")
    branches.add_argument("--queries", type=int, default=200, help="searches per measured view")
    branches.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dirs here")
    branches.add_argument("--reuse", action="store_true", help="search-only re-run over --work-dir's data from an earlier run")
    branches.set_defaults(handler=_runner("branches"))

    vectors = which.add_parser("vectors", help=BENCHES["vectors"])
    source = vectors.add_mutually_exclusive_group(required=True)
    source.add_argument("--data-dir", type=Path, help="a data dir whose stored vectors to use (its worker stopped)")
    source.add_argument("--random", type=int, help="this many random unit vectors (speed only)")
    vectors.add_argument("--queries", type=int, default=200, help="queries (embedded here from the bench texts)")
    vectors.add_argument("--k", type=int, default=60, help="top k (the search service asks for 60)")
    vectors.set_defaults(handler=_runner("vectors"))

    session = which.add_parser("session", help=BENCHES["session"] + " (a checkout, after `make e2e-deps`)")
    session.add_argument("--runs", type=int, default=10, help="timed sessions of each kind")
    session.add_argument("--hook-runs", type=int, default=5, help="extra sessions that time each hook (0: skip)")
    session.add_argument("--parts", action="store_true",
                         help="also the plugin with hooks only and with its MCP server only: where its share goes")
    session.add_argument("--proxy", action="store_true",
                         help="tool search off, as behind a proxy (Claude Code then waits for MCP servers first)")
    session.set_defaults(handler=_runner("session"))
    ingest = which.add_parser("ingest", help=BENCHES["ingest"])
    ingest.add_argument("--n", type=int, default=2000, help="memories written each way")
    ingest.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dir here")
    ingest.set_defaults(handler=_runner("ingest"))

    redaction = which.add_parser("redaction", help=BENCHES["redaction"])
    redaction.add_argument("--extra", action="append", help="another file or tree of ordinary text (repeatable)")
    redaction.add_argument("--ids", type=int, default=10_000, help="generated ids of each kind (hashes, UUIDs, tool-use ids)")
    redaction.add_argument("--show", type=int, default=30, help="hits listed with their context")
    redaction.set_defaults(handler=_runner("redaction"))


    team = which.add_parser(
        "team", help=BENCHES["team"],
        description="Starts a throwaway PostgreSQL cluster (or uses --storage-url), runs storage init and add-member "
        "for three roles, starts three workers on it and one on SQLite, and prints the figures. The default 100,000 "
        "memories take about half an hour on a 2-core machine (the load, on both backends); `make bench` runs --n 20000.",
    )  # fmt: skip
    team.add_argument("--n", type=int, default=100_000, help="memories written (the filtered search runs at this size)")
    team.add_argument("--probes", type=int, default=50, help="visibility probes (each found by two other workers)")
    team.add_argument("--events", type=int, default=50, help="hook events posted to each worker while the database is down")
    team.add_argument("--queries", type=int, default=300, help="filtered searches per backend")
    team.add_argument("--storage-url", default=None,
                      help="an existing, empty team database's owner URL (postgresql://OWNER@HOST/DB) instead of a "
                      "throwaway cluster; members connect without a password, so the server must trust them; "
                      "the outage is then not measured")  # fmt: skip
    team.add_argument("--work-dir", type=Path, default=None, help="keep the workers' data dirs here")
    team.set_defaults(handler=_runner("team"))

    search = which.add_parser(
        "search", help=BENCHES["search"],
        description="Writes N memories (bench scale's generator) to a SQLite data dir and to a team database in a "
        "throwaway PostgreSQL cluster (or --storage-url), the same embeddings on both, then times the search service "
        "itself on each: keyword and hybrid, without filters and with project + user filters.",
    )  # fmt: skip
    search.add_argument("--n", type=int, default=20_000, help="memories written to each backend")
    search.add_argument("--queries", type=int, default=200, help="searches per row and backend")
    search.add_argument("--storage-url", default=None,
                        help="an existing, empty team database's owner URL instead of a throwaway cluster; "
                        "members connect without a password, so the server must trust them")  # fmt: skip
    search.add_argument("--work-dir", type=Path, default=None, help="keep the SQLite data dir here")
    search.set_defaults(handler=_runner("search"))

    context = which.add_parser("context", help=BENCHES["context"])
    context.add_argument("--path", choices=["local", "claude", "both"], default="both",
                         help="local (no Claude) and/or Claude against a fake Messages API on 127.0.0.1")  # fmt: skip
    context.add_argument("--show-context", action="store_true", help="print each scenario's next SessionStart context")
    context.add_argument("--via", choices=["hooks", "api"], default="hooks",
                         help="read context and recall through the real hook commands, or the endpoints they call")  # fmt: skip
    context.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dirs here")
    context.set_defaults(handler=_runner("context"))

    replay = which.add_parser(
        "replay", help=BENCHES["replay"],
        description="Imports the folder's Claude Code transcripts (memory-anchor import-history) into a real worker on a "
        "throw-away data dir, then prints what the next briefing, per-prompt recall and the MCP search give; sessions "
        "in the folder's probes.jsonl are asked how their issue was fixed (e.g. ../shared/bench/replay/django).",
    )  # fmt: skip
    replay.add_argument("dir", type=Path, help="a folder of transcripts (and its probes.jsonl)")
    replay.add_argument("--claude", action="store_true",
                        help="distil through Claude (your route and daily token budget; spends your allowance)")
    replay.add_argument("--quick", type=int, default=None, metavar="N", help="only the last N sessions")
    replay.add_argument("--via", choices=["api", "hooks"], default="api",
                        help="read briefing and recall from the endpoints the hooks call (default), or the real hooks")
    replay.add_argument("--show-briefing", action="store_true", help="print the whole briefing")
    replay.add_argument("--work-dir", type=Path, default=None, help="keep the benchmark's data dir here")
    replay.add_argument("--labels", type=Path, default=None, metavar="FILE",
                        help="a reader's label of every user prompt (standing/borderline/not, JSON Lines): prints the "
                        "precision and recall of the rules every project's briefing lists, and of those waiting for approval")  # fmt: skip
    replay.set_defaults(handler=_runner("replay"))

    staleness = which.add_parser("staleness", help=BENCHES["staleness"])
    staleness.add_argument("--quick", action="store_true", help="two scripted histories and fewer timed builds (the test's form)")
    staleness.add_argument("--projects", type=int, default=None, help="scripted histories (default 6; 2 with --quick)")
    staleness.add_argument("--memories", type=int, default=1000, help="memories of the project whose briefing is timed (0: skip)")
    staleness.add_argument("--work-dir", type=Path, default=None, help="keep the repositories and the data dir here")
    staleness.set_defaults(handler=_runner("staleness"))


def _runner(name: str):
    def run(args: argparse.Namespace) -> int:
        module = importlib.import_module(f"memory_anchor.bench.{name}")
        return int(module.run(args) or 0)

    return run
