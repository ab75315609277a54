"""`memory-anchor worker start|stop|status|run`."""

from __future__ import annotations

import argparse

from memory_anchor.core import paths
from memory_anchor.cli.main import emit


def register(sub) -> None:
    worker = sub.add_parser("worker", help="start, stop or inspect the worker daemon")
    actions = worker.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = actions.add_parser("start", help="start the worker in the background (no-op if running)")
    start.set_defaults(handler=start_worker)
    actions.add_parser("stop", help="stop the worker (SIGTERM, then wait)").set_defaults(handler=stop_worker)
    actions.add_parser("status", help="is it running, where, and what it holds").set_defaults(handler=status)
    run = actions.add_parser("run", help="run the worker in the foreground")
    run.add_argument("--port", type=int, default=None, help="preferred port (default from settings)")
    run.set_defaults(handler=run_foreground)
    sub.add_parser("status", help="the worker's status, with quarantined events (= worker status)").set_defaults(handler=status)


def _data_dir(args: argparse.Namespace):
    return args.data_dir or paths.data_dir()


def start_worker(args: argparse.Namespace) -> int:
    from memory_anchor.core import lifecycle

    info = lifecycle.start_background(_data_dir(args))
    emit(args, info.__dict__ | {"url": info.url}, f"worker running at {info.url} (pid {info.pid})")
    return 0


def stop_worker(args: argparse.Namespace) -> int:
    from memory_anchor.core import lifecycle

    stopped = lifecycle.stop(_data_dir(args))
    emit(args, {"stopped": stopped}, "worker stopped" if stopped else "no worker was running")
    return 0


def status(args: argparse.Namespace) -> int:
    from memory_anchor.client.worker_client import WorkerClient
    from memory_anchor.core import lifecycle

    info = lifecycle.running_worker(_data_dir(args))
    if info is None:
        emit(args, {"running": False}, f"no worker running for {_data_dir(args)}")
        return 1
    from memory_anchor.cli.inbox import quarantine_text

    worker_client = WorkerClient(_data_dir(args), autostart=False)
    detail = worker_client.get("/api/v1/status")
    inbox = worker_client.get("/api/v1/inbox")
    text = (
        f"worker running at {info.url} (pid {info.pid}, version {info.version})\n"
        f"data dir: {detail['data_dir']}\n{store_line(detail.get('store'))}\n"
        f"records: {detail['records']}\ninbox: {detail['inbox']}\n"
        f"pending vectors: {detail['pending_vectors']}\nRSS: {detail['rss_mb']} MB (peak {detail['peak_rss_mb']} MB)\n"
        f"Claude: {detail['llm'].get('active') or detail['llm'].get('reason')}\n"
        + quarantine_text(inbox)
    )
    detail["quarantined"] = inbox["quarantined"]
    emit(args, {"running": True, "url": info.url, "pid": info.pid, **detail}, text)
    return 0


def store_line(store: dict | None) -> str:
    """Where the memory lives, and plainly when the team store cannot be reached."""
    if not store or store.get("backend") == "sqlite":
        return "store: SQLite in the data dir"
    if not store.get("reachable"):
        return f"team store unreachable: {store.get('reason')} (events wait in the inbox)"
    return f"store: PostgreSQL at {store.get('url')}"


def run_foreground(args: argparse.Namespace) -> int:
    from memory_anchor.worker.app import run_worker

    return run_worker(_data_dir(args), port=args.port)
