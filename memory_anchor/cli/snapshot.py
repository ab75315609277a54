"""`memory-anchor snapshot ...`: name points in memory's history, list them, search the past."""

from __future__ import annotations

import argparse

from memory_anchor.client import branches as branch_api
from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    snap = sub.add_parser("snapshot", help="snapshots and time travel")
    cmds = snap.add_subparsers(dest="snapshot_command", metavar="ACTION")

    create = cmds.add_parser("create", help="name the current state of a branch")
    create.add_argument("label", nargs="?", help="default snap-<branch>-<seq>")
    create.add_argument("--branch", default="main")
    create.add_argument("-d", "--description", default="")
    create.set_defaults(handler=create_snapshot)

    ls = cmds.add_parser("list", help="snapshots, oldest first")
    ls.add_argument("--branch")
    ls.set_defaults(handler=list_snapshots)

    delete = cmds.add_parser("delete", help="forget a snapshot's name (memory is unaffected)")
    delete.add_argument("label")
    delete.set_defaults(handler=delete_snapshot)

    travel = cmds.add_parser("travel", help="search memory as it was at a seq, snapshot or timestamp")
    travel.add_argument("as_of")
    travel.add_argument("query")
    travel.add_argument("--branch", default="main")
    travel.add_argument("--project")
    travel.add_argument("-k", "--top-k", type=int, default=10)
    travel.set_defaults(handler=time_travel)

    snap.set_defaults(handler=lambda args: snap.print_help() or 0)


def _line(s: dict) -> str:
    desc = f"  {s['description']}" if s.get("description") else ""
    return f"{s['name']:<32} {s['branch']:<24} seq {s['seq']:<8} {(s.get('created_at') or '')[:19]}{desc}"


def create_snapshot(args: argparse.Namespace) -> int:
    s = branch_api.snapshot(client(args), args.label, args.branch, args.description)
    emit(args, s, f"snapshot {s['name']} = {s['branch']} at seq {s['seq']}")
    return 0


def list_snapshots(args: argparse.Namespace) -> int:
    found = branch_api.list_snapshots(client(args), args.branch)
    emit(args, found, "\n".join(_line(s) for s in found) or "no snapshots")
    return 0


def delete_snapshot(args: argparse.Namespace) -> int:
    s = branch_api.delete_snapshot(client(args), args.label)
    emit(args, s, f"forgot snapshot {s['name']}")
    return 0


def time_travel(args: argparse.Namespace) -> int:
    answer = branch_api.time_travel(client(args), args.query, args.as_of, branch=args.branch, project=args.project,
                                    top_k=args.top_k)  # fmt: skip
    lines = [f"{args.branch} as of {answer['as_of']} (seq {answer['seq']}):"]
    for hit in answer["results"]:
        text = " ".join((hit.get("title") or hit.get("memory") or "").split())[:110]
        lines.append(f"  {hit['id'][:8]} v{hit.get('version')} [{hit.get('kind')}] {text}")
    emit(args, answer, "\n".join(lines) if answer["results"] else lines[0] + " nothing matches")
    return 0
