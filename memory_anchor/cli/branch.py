"""`memory-anchor branch ...`: create, list, switch, diff, merge, archive and delete memory branches."""

from __future__ import annotations

import argparse
import os

from memory_anchor.client import branches as branch_api
from memory_anchor.cli.main import client, emit

STRATEGIES = ["auto", "cherry_pick", "squash", "accept", "skip"]


def register(sub) -> None:
    branch = sub.add_parser("branch", help="memory branches: create, list, switch, diff, merge, archive, delete")
    cmds = branch.add_subparsers(dest="branch_command", metavar="ACTION")

    create = cmds.add_parser("create", help="fork a branch (zero-copy) from a parent, a point in time or a snapshot")
    create.add_argument("name")
    create.add_argument("--parent", help="branch to fork from (default main)")
    create.add_argument("--from-snapshot", help="fork at this snapshot (parent = its branch)")
    create.add_argument("--as-of", help="fork the parent as it was then: seq, snapshot or timestamp")
    create.add_argument("-d", "--description", default="")
    create.set_defaults(handler=create_branch)

    ls = cmds.add_parser("list", help="every branch with its fork point and counts")
    ls.add_argument("--status", choices=["active", "merged", "archived"])
    ls.set_defaults(handler=list_branches)

    show = cmds.add_parser("show", help="one branch")
    show.add_argument("name")
    show.set_defaults(handler=show_branch)

    switch = cmds.add_parser("switch", help="send a session's later writes to a branch")
    switch.add_argument("name")
    switch.add_argument("--session-id", default=os.environ.get("CLAUDE_CODE_SESSION_ID"),
                        help="the Claude Code session (default $CLAUDE_CODE_SESSION_ID)")  # fmt: skip
    switch.add_argument("--create", action="store_true", help="create the branch if it does not exist")
    switch.add_argument("--parent", help="parent when creating (default main)")
    switch.set_defaults(handler=switch_branch)

    diff = cmds.add_parser("diff", help="what SOURCE changed vs TARGET since they diverged, and the conflicts")
    diff.add_argument("source")
    diff.add_argument("target", nargs="?", default="main")
    diff.add_argument("--kinds", help="comma-separated record kinds, e.g. fact,observation")
    diff.add_argument("-n", "--limit", type=int, default=200)
    diff.set_defaults(handler=diff_branches)

    merge = cmds.add_parser("merge", help="merge SOURCE into TARGET (default main)")
    merge.add_argument("source")
    merge.add_argument("target", nargs="?", default="main")
    merge.add_argument("-s", "--strategy", choices=STRATEGIES, default="auto")
    merge.add_argument("--items", nargs="+", help="cherry_pick: record ids to bring over")
    merge.add_argument("--resolve", action="append", default=[], metavar="KEY=source|target",
                       help="decide a conflict (conflict key or record id); repeatable")  # fmt: skip
    merge.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")
    merge.set_defaults(handler=merge_branches)

    history = cmds.add_parser("merges", help="merge history")
    history.add_argument("--branch")
    history.add_argument("-n", "--limit", type=int, default=20)
    history.set_defaults(handler=merge_history)

    archive = cmds.add_parser("archive", help="hide a branch from active lists and make it read-only (its memory stays readable)")
    archive.add_argument("name")
    archive.set_defaults(handler=lambda args: _status(args, "archived"))

    restore = cmds.add_parser("restore", help="make an archived branch active (and writable) again")
    restore.add_argument("name")
    restore.set_defaults(handler=lambda args: _status(args, "active"))

    delete = cmds.add_parser("delete", help="delete a branch and its own writes (merged copies stay)")
    delete.add_argument("name")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(handler=delete_branch)

    branch.set_defaults(handler=lambda args: branch.print_help() or 0)


def _line(b: dict) -> str:
    origin = f"from {b['parent']}@{b['fork_seq']}" if b.get("parent") else "root"
    desc = f"  {b['description']}" if b.get("description") else ""
    return f"{b['name']:<32} {b['status']:<8} {origin:<20} {b['own_writes']:>6} writes {b['sessions']:>3} sessions{desc}"


def create_branch(args: argparse.Namespace) -> int:
    made = branch_api.create_branch(
        client(args), args.name, parent=args.parent, from_snapshot=args.from_snapshot, as_of=args.as_of,
        description=args.description,
    )  # fmt: skip
    emit(args, made, f"created {made['name']} from {made['parent']} at seq {made['fork_seq']}")
    return 0


def list_branches(args: argparse.Namespace) -> int:
    found = branch_api.list_branches(client(args), args.status)
    emit(args, found, "\n".join(_line(b) for b in found) or "no branches")
    return 0


def show_branch(args: argparse.Namespace) -> int:
    found = branch_api.get_branch(client(args), args.name)
    emit(args, found, _line(found))
    return 0


def switch_branch(args: argparse.Namespace) -> int:
    if not args.session_id:
        print("memory-anchor: --session-id is required outside a Claude Code session")
        return 2
    result = branch_api.switch(client(args), args.session_id, args.name, create=args.create, parent=args.parent)
    emit(args, result, f"session {result['session_id']} now writes to {result['branch']}"
                       + (f" (was {result['previous']})" if result.get("previous") else ""))  # fmt: skip
    return 0


def render_diff(d: dict) -> str:
    c = d["counts"]
    lines = [
        f"{d['source']} vs {d['target']} (common base {d['base']})",
        f"  {d['source']}: +{c['source_added']} added, ~{c['source_changed']} changed, -{c['source_invalidated']} invalidated",
        f"  {d['target']}: +{c['target_added']} added, ~{c['target_changed']} changed, -{c['target_invalidated']} invalidated",
        f"  conflicts: {c['conflicts']}",
    ]
    marks = {"added": "+", "changed": "~", "invalidated": "-"}
    for side in ("source", "target"):
        for item in d[f"{side}_changes"]:
            text = " ".join((item.get("text") or item.get("title") or "").split())[:100]
            lines.append(f"{side[0].upper()} {marks[item['change']]} {item['id']} [{item['kind']}] {text}")
    for conflict in d["conflicts"]:
        lines.append(f"! {conflict['key']}: {conflict['reason']}")
        lines.append(f"    source: {conflict['source']['text'][:100]}")
        lines.append(f"    target: {conflict['target']['text'][:100]}")
    return "\n".join(lines)


def diff_branches(args: argparse.Namespace) -> int:
    kinds = [k for k in (args.kinds or "").split(",") if k] or None
    d = branch_api.diff(client(args), args.source, args.target, kinds=kinds, limit=args.limit)
    emit(args, d, render_diff(d))
    return 0


def render_merge(m: dict) -> str:
    head = "planned" if m.get("dry_run") else f"merge {m['id']}"
    lines = [f"{head}: {m['source']} → {m['target']} ({m['strategy']}, decided by {m['merged_by']})"]
    lines += [f"  merged   {i['action']:<11} {i['id']} {' '.join(i.get('text', '').split())[:80]}" for i in m["merged"]]
    lines += [f"  rejected {i['id']}: {i['reason']}" for i in m["rejected"]]
    lines += [f"  conflict {c['key']}: {c['resolution']} ({c['decided_by']}) {c.get('reason', '')}" for c in m["conflicts"]]
    if m.get("open_conflicts"):
        lines.append(f"  {m['open_conflicts']} conflict(s) left open: resolve with --resolve KEY=source|target")
    if m.get("source_marked_merged"):
        lines.append(f"  {m['source']} is now marked merged")
    return "\n".join(lines)


def merge_branches(args: argparse.Namespace) -> int:
    resolutions = {}
    for entry in args.resolve:
        key, _, side = entry.rpartition("=")
        if not key or side not in ("source", "target"):
            print(f"memory-anchor: --resolve takes KEY=source|target, got {entry!r}")
            return 2
        resolutions[key] = side
    m = branch_api.merge(
        client(args), args.source, args.target, args.strategy, items=args.items, resolutions=resolutions or None,
        dry_run=args.dry_run,
    )  # fmt: skip
    emit(args, m, render_merge(m))
    return 0


def merge_history(args: argparse.Namespace) -> int:
    found = branch_api.merges(client(args), args.branch, args.limit)
    text = "\n".join(
        f"{m['created_at'][:19]} {m['id'][:8]} {m['source']} → {m['target']} {m['strategy']} "
        f"({len(m['merged'])} merged, {len(m['rejected'])} rejected, {m['open_conflicts']} open)"
        for m in found
    )
    emit(args, found, text or "no merges yet")
    return 0


def _status(args: argparse.Namespace, status: str) -> int:
    b = branch_api.set_status(client(args), args.name, status)
    emit(args, b, f"{b['name']} is now {b['status']}")
    return 0


def delete_branch(args: argparse.Namespace) -> int:
    if not args.yes:
        answer = input(f"Delete branch {args.name!r} and everything written on it (merged copies stay)? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not deleted")
            return 1
    result = branch_api.delete_branch(client(args), args.name)
    emit(args, result, f"deleted {result['name']}: {result['deleted_versions']} versions, "
                       f"{result['deleted_snapshots']} snapshots")  # fmt: skip
    return 0
