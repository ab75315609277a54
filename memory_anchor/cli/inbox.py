"""`memory-anchor inbox [list|retry ID|drop ID]`.

A captured event that keeps failing is quarantined so that capture goes on;
these commands show what is quarantined and why, and put it back in line
(`retry`, once whatever made it fail is fixed) or discard it (`drop`).
"""

from __future__ import annotations

import argparse
import time

from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    group = sub.add_parser("inbox", help="captured events: counts, quarantined ones, retry or drop them")
    cmds = group.add_subparsers(dest="inbox_command", metavar="ACTION")
    group.set_defaults(handler=show_inbox)
    cmds.add_parser("list", help="counts and the quarantined events with their errors").set_defaults(handler=show_inbox)
    for name, handler, what in (("retry", retry, "put a quarantined item back in line"), ("drop", drop, "discard a quarantined item")):
        action = cmds.add_parser(name, help=what)
        action.add_argument("id", type=int, help="the quarantine ID that `memory-anchor inbox` shows")
        action.set_defaults(handler=handler)


def describe(item: dict) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["quarantined_at"]))
    what = f"inbox event {item['inbox_id']}" if item["stage"] == "capture" else f"record version {item['record_seq']} (indexing)"
    return (
        f"#{item['id']} {what}: {item.get('event') or '?'}, session {item.get('session_id') or '-'}, "
        f"{item['attempts']} attempts, quarantined {when}\n    error: {item['error']}"
    )


def quarantine_text(inbox: dict) -> str:
    items = inbox.get("quarantined") or []
    if not items:
        return "quarantined: none"
    lines = [f"quarantined: {inbox['counts'].get('quarantined', len(items))} (retry or drop with `memory-anchor inbox retry|drop ID`)"]
    return "\n".join(lines + [describe(item) for item in items])


def show_inbox(args: argparse.Namespace) -> int:
    inbox = client(args).get("/api/v1/inbox")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(inbox["counts"].items()))
    emit(args, inbox, f"inbox: {counts or 'empty'}\n{quarantine_text(inbox)}")
    return 0


def retry(args: argparse.Namespace) -> int:
    item = client(args).post(f"/api/v1/inbox/quarantine/{args.id}/retry", {})
    emit(args, item, f"#{args.id} is back in line")
    return 0


def drop(args: argparse.Namespace) -> int:
    item = client(args).delete(f"/api/v1/inbox/quarantine/{args.id}")
    emit(args, item, f"#{args.id} dropped")
    return 0
