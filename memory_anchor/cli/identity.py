"""`memory-anchor identity list|add|edit|remove|restore|history`: the L0 identity layer.

Only a human writes here, with three confirmations (or `--yes` in a script,
which states that they are given). Removal is a soft delete, restorable for 7 days.
"""

from __future__ import annotations

import argparse
import os

from memory_anchor.cli.human import confirm_three_times, human_name, refuse_inside_agent
from memory_anchor.cli.main import client, emit

YES_HELP = "skip the three confirmations (for scripts: passing --yes states that you confirm three times)"


def register(sub) -> None:
    group = sub.add_parser("identity", help="the identity layer (L0): always loaded, written only by you")
    cmds = group.add_subparsers(dest="identity_command", metavar="ACTION")
    group.set_defaults(handler=list_items, project=None, all_projects=False, removed=False)

    def scope(p):
        p.add_argument("--project", help="project path (default: the git root of the current directory)")
        p.add_argument("--global", dest="all_projects", action="store_true", help="an item every project sees")

    listing = cmds.add_parser("list", help="the items a project sees, by priority")
    scope(listing)
    listing.add_argument("--removed", action="store_true", help="include removed items (restorable for 7 days)")
    listing.set_defaults(handler=list_items)

    add = cmds.add_parser("add", help="add an item (three confirmations)")
    add.add_argument("content")
    add.add_argument("--priority", type=int, help="0 = most important (default: last)")
    scope(add)
    add.add_argument("--yes", action="store_true", help=YES_HELP)
    add.set_defaults(handler=add_item)

    edit = cmds.add_parser("edit", help="change an item's text or priority (three confirmations)")
    edit.add_argument("id")
    edit.add_argument("--content")
    edit.add_argument("--priority", type=int)
    edit.add_argument("--yes", action="store_true", help=YES_HELP)
    scope(edit)  # where to look up a short id
    edit.set_defaults(handler=edit_item)

    remove = cmds.add_parser("remove", help="soft-delete an item, restorable for 7 days (three confirmations)")
    remove.add_argument("id")
    remove.add_argument("--yes", action="store_true", help=YES_HELP)
    scope(remove)  # where to look up a short id
    remove.set_defaults(handler=remove_item)

    restore = cmds.add_parser("restore", help="bring back a removed item within 7 days (three confirmations)")
    restore.add_argument("id")
    restore.add_argument("--yes", action="store_true", help=YES_HELP)
    scope(restore)  # where to look up a short id
    restore.set_defaults(handler=restore_item)

    history = cmds.add_parser("history", help="every version of an item, with who and when")
    history.add_argument("id")
    scope(history)  # where to look up a short id
    history.set_defaults(handler=item_history)


def _project(args: argparse.Namespace) -> str:
    if getattr(args, "all_projects", False):
        return ""
    if getattr(args, "project", None):
        return args.project
    return client(args).project_for_cwd(os.getcwd())


def _line(item: dict) -> str:
    priority = item.get("data", {}).get("priority", "-")
    scope = "global" if not item.get("project") else "project"
    removed = " [removed]" if item.get("status") == "removed" else ""
    return f"{item['id'][:8]} p{priority} ({scope}){removed} {item.get('text') or item.get('memory')}"


def _resolve(args, item_id: str) -> str:
    """Accept the 8-character prefix the list shows."""
    if len(item_id) >= 32:
        return item_id
    items = client(args).get("/api/v1/identity", project=_project(args), include_removed="true")["results"]
    matches = [i["id"] for i in items if i["id"].startswith(item_id)]
    return matches[0] if len(matches) == 1 else item_id


def list_items(args: argparse.Namespace) -> int:
    items = client(args).get("/api/v1/identity", project=_project(args), include_removed="true" if args.removed else "false")["results"]
    emit(args, items, "\n".join(_line(i) for i in items) or "the identity layer is empty")
    return 0


def _write(args, method: str, path: str, body: dict, action: str) -> dict:
    refuse_inside_agent(f"identity {action}")
    confirmations = confirm_three_times(action, args.yes)
    payload = {**{k: v for k, v in body.items() if v is not None}, "confirmations": confirmations, "actor": human_name()}
    return client(args).request(method, path, payload)


def add_item(args: argparse.Namespace) -> int:
    item = _write(args, "POST", "/api/v1/identity", {"content": args.content, "priority": args.priority, "project": _project(args)}, "add to")
    emit(args, item, f"added {_line(item)}")
    return 0


def edit_item(args: argparse.Namespace) -> int:
    item_id = _resolve(args, args.id)
    item = _write(args, "PUT", f"/api/v1/identity/{item_id}", {"content": args.content, "priority": args.priority}, "edit")
    emit(args, item, f"edited {_line(item)}")
    return 0


def remove_item(args: argparse.Namespace) -> int:
    item_id = _resolve(args, args.id)
    item = _write(args, "POST", f"/api/v1/identity/{item_id}/remove", {}, "remove from")
    emit(args, item, f"removed {item['id'][:8]}; restore it within 7 days with `memory-anchor identity restore {item['id'][:8]}`")
    return 0


def restore_item(args: argparse.Namespace) -> int:
    item_id = _resolve(args, args.id)
    item = _write(args, "POST", f"/api/v1/identity/{item_id}/restore", {}, "restore into")
    emit(args, item, f"restored {_line(item)}")
    return 0


def item_history(args: argparse.Namespace) -> int:
    versions = client(args).get(f"/api/v1/identity/{_resolve(args, args.id)}/history")["results"]
    lines = [f"v{v['version']} {v['created_at']} {v['actor']} {v['reason']}: {v.get('text') or '(deleted)'} [{v['status']}]" for v in versions]
    emit(args, versions, "\n".join(lines))
    return 0
