"""`memory-anchor search|timeline|add|get|history|reindex`: memory from the terminal."""

from __future__ import annotations

import argparse

from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    search = sub.add_parser("search", help="hybrid search over memory")
    search.add_argument("query")
    search.add_argument("-k", "--top-k", type=int, default=10)
    search.add_argument("--project", help="limit to one project (its path)")
    search.add_argument("--user-id")
    search.add_argument("--branch")
    search.add_argument("--as-of", help="sequence number, snapshot name or timestamp")
    search.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid")
    search.set_defaults(handler=search_memory)

    timeline = sub.add_parser("timeline", help="what was captured, newest first")
    timeline.add_argument("--project")
    timeline.add_argument("--session-id")
    timeline.add_argument("--branch")
    timeline.add_argument("-n", "--limit", type=int, default=20)
    timeline.set_defaults(handler=show_timeline)

    add = sub.add_parser("add", help="store a memory as given (no inference)")
    add.add_argument("text")
    add.add_argument("--user-id")
    add.add_argument("--project")
    add.add_argument("--branch")
    add.set_defaults(handler=add_memory)

    get = sub.add_parser("get", help="one memory by id")
    get.add_argument("id")
    get.add_argument("--branch")
    get.add_argument("--as-of")
    get.set_defaults(handler=get_memory)

    history = sub.add_parser("history", help="every version of a memory, oldest first")
    history.add_argument("id")
    history.add_argument("--branch")
    history.set_defaults(handler=memory_history)

    reindex = sub.add_parser("reindex", help="rebuild the vector index (Chroma) from SQLite")
    reindex.set_defaults(handler=reindex_vectors)


def _line(record: dict) -> str:
    when = (record.get("happened_at") or "")[:16].replace("T", " ")
    text = " ".join((record.get("title") or record.get("memory") or "").split())[:120]
    score = f" {record['score']:.3f}" if record.get("score") is not None else ""
    # A search returns a memory said several times once, and folds more hits under one title.
    said = f" (said {record['count']} times)" if (record.get("count") or 1) > 1 else ""
    similar = f" (+{record['similar']} more like it)" if record.get("similar") else ""
    return f"{record['id'][:8]} {when} [{record.get('kind')}/{record.get('type') or '-'}]{score} {text}{said}{similar}"


def search_memory(args: argparse.Namespace) -> int:
    filters = {k: v for k, v in {"project": args.project, "user_id": args.user_id}.items() if v}
    hits = client(args).search(args.query, filters=filters, top_k=args.top_k, branch=args.branch, as_of=args.as_of, mode=args.mode)
    emit(args, hits, "\n".join(_line(h) for h in hits) or "no memories found")
    return 0


def show_timeline(args: argparse.Namespace) -> int:
    page = client(args).get(
        "/api/v1/timeline", project=args.project, session_id=args.session_id, branch=args.branch, limit=args.limit
    )
    emit(args, page, "\n".join(_line(r) for r in page["results"]) or "nothing captured yet")
    return 0


def add_memory(args: argparse.Namespace) -> int:
    result = client(args).add(args.text, infer=False, user_id=args.user_id, project=args.project, branch=args.branch)
    emit(args, result, "\n".join(f"{r['event']} {r['id']}" for r in result["results"]))
    return 0


def get_memory(args: argparse.Namespace) -> int:
    record = client(args).get_memory(args.id, branch=args.branch, as_of=args.as_of)
    emit(args, record, f"{_line(record)}\n\n{record['memory']}")
    return 0


def memory_history(args: argparse.Namespace) -> int:
    versions = client(args).history(args.id, branch=args.branch)
    text = "\n".join(
        f"v{v['version']} seq {v['seq']} {v['created_at']} {v.get('actor') or '-'} {v.get('reason') or ''}"
        f"{' (deleted)' if v.get('deleted') else ''}: {' '.join(v['memory'].split())[:100]}"
        for v in versions
    )
    emit(args, versions, text)
    return 0


def reindex_vectors(args: argparse.Namespace) -> int:
    """Rebuild the vectors, showing on stderr how many records are left while the worker works."""
    import sys
    import threading

    outcome: dict = {}

    def rebuild() -> None:
        try:
            from memory_anchor.client.worker_client import WorkerClient

            # One answer at the end: at 100k records that is minutes away.
            rebuilder = WorkerClient(args.data_dir, timeout=24 * 3600.0)
            outcome["result"] = rebuilder.post("/api/v1/admin/reindex", {})
        except Exception as exc:  # reported below, on the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=rebuild, daemon=True)
    worker.start()
    watcher, total, shown = client(args, autostart=False), 0, None
    while worker.is_alive():
        worker.join(1.0)
        if not worker.is_alive():
            break
        try:
            left = int(watcher.get("/api/v1/status")["pending_vectors"] or 0)
        except Exception:
            continue  # progress is a nicety; the rebuild's own answer decides
        total = max(total, left)
        if total and left != shown:
            print(f"re-embedding: {total - left} of {total} records done", file=sys.stderr, flush=True)
            shown = left
    if "error" in outcome:
        raise outcome["error"]
    result = outcome["result"]
    emit(args, result, f"re-embedded {result['indexed']} records in {result['seconds']:.1f}s")
    return 0
