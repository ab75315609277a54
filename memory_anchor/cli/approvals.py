"""`memory-anchor approvals list|approve|reject`: proposals waiting for a human.

Identity proposals from agents, facts of medium confidence (0.7-0.9) and the
writes of read-only agents. Approving an identity change asks the three
confirmations (or `--yes`).
"""

from __future__ import annotations

import argparse
import json

from memory_anchor.cli.human import confirm_three_times, human_name, refuse_inside_agent
from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    group = sub.add_parser("approvals", help="proposals waiting for a human: list, approve, reject")
    cmds = group.add_subparsers(dest="approvals_command", metavar="ACTION")
    group.set_defaults(handler=list_approvals, all=False, kind=None)

    listing = cmds.add_parser("list", help="pending proposals (--all for decided ones too)")
    listing.add_argument("--all", action="store_true")
    listing.add_argument("--kind", choices=["identity_change", "fact", "agent_write"])
    listing.set_defaults(handler=list_approvals)

    approve = cmds.add_parser("approve", help="accept a proposal (identity changes: three confirmations)")
    approve.add_argument("id", type=int)
    approve.add_argument("--note")
    approve.add_argument("--yes", action="store_true", help="skip the three confirmations of an identity change (scripts)")
    approve.set_defaults(handler=approve_one)

    reject = cmds.add_parser("reject", help="turn a proposal down (nothing is written)")
    reject.add_argument("id", type=int)
    reject.add_argument("--note")
    reject.set_defaults(handler=reject_one)


def describe(approval: dict) -> str:
    payload = approval.get("payload") or {}
    what = payload.get("content") or payload.get("text") or json.dumps(payload, ensure_ascii=False)[:160]
    who = approval.get("agent_id") or "-"
    status = "" if approval["status"] == "pending" else f" [{approval['status']}]"
    return f"#{approval['id']} {approval['kind']}/{approval['action']} by {who}{status}: {what}  ({approval.get('reason') or ''})"


def list_approvals(args: argparse.Namespace) -> int:
    rows = client(args).get("/api/v1/approvals", status="all" if args.all else "pending", **({"kind": args.kind} if args.kind else {}))["results"]
    emit(args, rows, "\n".join(describe(r) for r in rows) or "nothing waits for approval")
    return 0


def approve_one(args: argparse.Namespace) -> int:
    refuse_inside_agent("approvals approve")
    api = client(args)
    pending = [a for a in api.get("/api/v1/approvals", status="pending")["results"] if a["id"] == args.id]
    confirmations = 0
    if pending and pending[0]["kind"] == "identity_change":
        print(describe(pending[0]))
        confirmations = confirm_three_times(f"{pending[0]['action']} (via this proposal)", args.yes)
    done = api.post(f"/api/v1/approvals/{args.id}/approve", {"actor": human_name(), "note": args.note, "confirmations": confirmations})
    emit(args, done, f"approved {describe(done)}")
    return 0


def reject_one(args: argparse.Namespace) -> int:
    refuse_inside_agent("approvals reject")
    done = client(args).post(f"/api/v1/approvals/{args.id}/reject", {"actor": human_name(), "note": args.note})
    emit(args, done, f"rejected {describe(done)}")
    return 0
