"""`memory-anchor briefing`: the text a Claude Code session started here would be given.

The same request the SessionStart hook makes (`GET /api/v1/context`), for the project the
current directory belongs to (or `--project`), so a person sees what Claude sees.
"""

from __future__ import annotations

import argparse
import os

from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    briefing = sub.add_parser("briefing", help="print the briefing a session started here would get")
    briefing.add_argument("--project", help="the project's path (default: the one the current directory belongs to)")
    briefing.add_argument("--branch", help="the memory branch (default main)")
    briefing.set_defaults(handler=show_briefing)


def show_briefing(args: argparse.Namespace) -> int:
    params = {"project": args.project} if args.project else {"cwd": os.getcwd()}
    if args.branch:
        params["branch"] = args.branch
    found = client(args).get("/api/v1/context", **params)
    emit(args, found, found["context"] or "memory holds nothing for this project yet")
    return 0
