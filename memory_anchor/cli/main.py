"""`memory-anchor`: run the worker, search and inspect memory, decide approvals, branch.

Each command group lives in its own module with a `register(subparsers)` that
adds its sub-commands; a sub-command's handler takes the parsed args and
returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from memory_anchor.core.version import __version__

COMMAND_MODULES = ["worker", "briefing", "memories", "settings", "viewer", "portability", "history", "bench", "identity", "approvals", "conflicts", "branch", "snapshot", "inbox", "doctor", "storage", "corrections", "verify"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-anchor",
        description="Long-term memory for AI coding agents (a Claude Code plugin).",
    )
    parser.add_argument("--version", action="version", version=f"memory-anchor {__version__}")
    parser.add_argument(
        "--data-dir", type=Path, default=None,
        help="data directory (default: $MEMORY_ANCHOR_DATA_DIR, $CLAUDE_PLUGIN_DATA or the user data dir)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print raw JSON instead of text")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"memory_anchor.cli.{name}").register(sub)
    _json_anywhere(parser)
    return parser


def _json_anywhere(parser: argparse.ArgumentParser) -> None:
    """`--json` is read after any sub-command too (`memory-anchor search q --json`), as people type it.

    SUPPRESS keeps a sub-command's default from overwriting a `--json` given before it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if "--json" not in child._option_string_actions:
                    child.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                                       help="print raw JSON instead of text")  # fmt: skip
                _json_anywhere(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0 if args.command is None else 2
    from memory_anchor.client.worker_client import WorkerError

    try:
        return int(args.handler(args) or 0)
    except WorkerError as exc:
        print(f"memory-anchor: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def client(args: argparse.Namespace, *, autostart: bool = True):
    from memory_anchor.client.worker_client import WorkerClient

    return WorkerClient(args.data_dir, autostart=autostart)


def emit(args: argparse.Namespace, value: Any, text: str | None = None) -> None:
    """Print JSON when asked (or when there is no text form), else the text."""
    if args.json or text is None:
        print(json.dumps(value, indent=2, ensure_ascii=False))
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
