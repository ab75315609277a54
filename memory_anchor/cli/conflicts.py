"""`memory-anchor conflicts [list|resolve]`: contradictions the rules could not settle.

Both statements are kept until a human picks: keep_existing (the new one is
rejected), keep_new (it becomes the next version of the existing fact) or
keep_both (both stay active).
"""

from __future__ import annotations

import argparse

from memory_anchor.cli.human import human_name, refuse_inside_agent
from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    group = sub.add_parser("conflicts", help="contradicting facts waiting for a human: list, resolve")
    cmds = group.add_subparsers(dest="conflicts_command", metavar="ACTION")
    group.set_defaults(handler=list_conflicts, all=False, project=None)

    listing = cmds.add_parser("list", help="open conflicts (--all for resolved ones too)")
    listing.add_argument("--all", action="store_true")
    listing.add_argument("--project")
    listing.set_defaults(handler=list_conflicts)

    resolve = cmds.add_parser("resolve", help="settle a conflict")
    resolve.add_argument("id", type=int)
    resolve.add_argument("resolution", choices=["keep_existing", "keep_new", "keep_both"])
    resolve.add_argument("--note")
    resolve.set_defaults(handler=resolve_one)


def describe(conflict: dict) -> str:
    old, new = conflict.get("existing") or {}, conflict.get("candidate") or {}
    tail = f" [{conflict['resolution']}]" if conflict.get("resolution") else ""
    return (f"#{conflict['id']}{tail} {conflict.get('reason') or ''}\n"
            f"    existing: {old.get('text')}\n    new:      {new.get('text')}")  # fmt: skip


def list_conflicts(args: argparse.Namespace) -> int:
    params = {"status": "all" if args.all else "open", **({"project": args.project} if args.project else {})}
    rows = client(args).get("/api/v1/conflicts", **params)["results"]
    emit(args, rows, "\n".join(describe(r) for r in rows) or "no open conflicts")
    return 0


def resolve_one(args: argparse.Namespace) -> int:
    refuse_inside_agent("conflicts resolve")
    done = client(args).post(f"/api/v1/conflicts/{args.id}/resolve", {"resolution": args.resolution, "actor": human_name(), "note": args.note})
    emit(args, done, f"resolved {describe(done)}")
    return 0
