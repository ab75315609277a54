"""`memory-anchor verify [--fix]`: every memory of the project checked against its working tree.

Prints each stale memory with why (its file changed since, in N commits; was
deleted; moved, and where to; the session's edit is no longer in it) and the
open next steps commits did. `--fix` demotes facts whose files are gone (they
wait for re-verification, as decayed facts do) and closes those steps with the
commit that did them. Run it in the project's directory, or name it.
"""

from __future__ import annotations

import argparse
import os

from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    verify = sub.add_parser("verify", help="check every memory of the project against its code (--fix: demote, close)")
    verify.add_argument("--fix", action="store_true", help="demote facts whose files are gone, close steps commits did")
    verify.add_argument("--project", help="the project (default: the one the current directory belongs to)")
    verify.add_argument("--all", action="store_true", help="list the memories that still hold too")
    verify.add_argument("--branch", help="the memory branch (default main)")
    verify.set_defaults(handler=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    body = {"cwd": os.getcwd(), "fix": args.fix, "include_fresh": args.all,
            **({"project": args.project} if args.project else {}), **({"branch": args.branch} if args.branch else {})}  # fmt: skip
    report = client(args).post("/api/v1/verify", body)
    emit(args, report, describe(report))
    return 0


def describe(report: dict) -> str:
    if report.get("why_unknown"):
        return f"{report['project']}: nothing checked: {report['why_unknown']}"
    states = report.get("states") or {}
    lines = [f"{report['project']} at {(report.get('head') or '?')[:12]}: {report['checked']} memories name its files; "
             + ", ".join(f"{n} {state}" for state, n in sorted(states.items())) if states else
             f"{report['project']}: no memory names a file of {report.get('repository')}"]  # fmt: skip
    for memory in report.get("stale") or []:
        lines.append(f"  stale  {memory['id'][:8]} [{memory['kind']}] {memory['line'][:100]}\n"
                     f"         {memory['freshness']['state']}: {memory['freshness']['detail']}")  # fmt: skip
    for memory in report.get("fresh") or []:
        lines.append(f"  holds  {memory['id'][:8]} [{memory['kind']}] {memory['line'][:100]}")
    verb = "closed" if report.get("fixed") else "done"
    for step in report.get("steps_done") or []:
        commit = step["closed_by_commit"]
        lines.append(f"  step {step['id']} {verb} by commit {commit['commit'][:8]} ({commit['subject']}): {step['text']}")
    if report.get("fixed"):
        lines.append(f"fixed: {report['facts_demoted']} facts demoted for re-verification, "
                     f"{report['facts_restored']} restored, {len(report.get('steps_done') or [])} steps closed")  # fmt: skip
    elif report.get("stale") or report.get("steps_done"):
        lines.append("run `memory-anchor verify --fix` to demote the facts whose files are gone and close the steps done")
    return "\n".join(lines)
