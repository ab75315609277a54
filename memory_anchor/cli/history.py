"""`memory-anchor import-history [PATH]`: Claude Code's transcripts into memory, with their original times."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from memory_anchor.cli.main import client, emit


def register(sub) -> None:
    load = sub.add_parser(
        "import-history",
        help="import Claude Code history (its transcripts) into memory, as if the hooks had captured it",
        description="Reads Claude Code transcripts (a .jsonl file, a folder of them, or by default the current "
        "project's folder under ~/.claude/projects/) and hands their prompts, tool uses, Claude's answers and "
        "session ends to the worker with their original times, through the same redaction as live capture. "
        "Importing again adds nothing. Distilled locally: no Claude tokens are spent unless --claude is given.",
    )  # fmt: skip
    load.add_argument("path", nargs="?", type=Path, help="a transcript or a folder of them (default: this project's)")
    load.add_argument("--claude", action="store_true",
                      help="distil through Claude as live capture does (spends your Claude allowance, within "
                      "llm_daily_token_budget); default: locally")  # fmt: skip
    load.add_argument("--wait", action="store_true", help="also wait until everything is embedded for search")
    load.add_argument("--all-projects", action="store_true",
                      help="without PATH: also import sessions of other projects found in this project's folder "
                      "(each under its own project); default: they are left out and listed")  # fmt: skip
    load.add_argument("--dismiss", action="store_true",
                      help="import nothing; new sessions stop saying that these earlier sessions can be imported")  # fmt: skip
    load.set_defaults(handler=import_history)


def import_history(args: argparse.Namespace) -> int:
    from memory_anchor.cli.history_import import Progress, default_sources
    from memory_anchor.cli.history_import import import_history as run_import
    from memory_anchor.core.projects import project_for_cwd
    from memory_anchor.worker.capture.history import claude_projects_dir, project_slug

    # Without PATH the user asked for this project: a session of another one found in its folder is
    # left out (a planted transcript must not write another project's briefing). With PATH they
    # named the files: each session goes to its own project, and the report says which.
    project = None
    if args.path is not None:
        if not args.path.exists():
            print(f"memory-anchor: {args.path} does not exist", file=sys.stderr)
            return 2
        sources = [args.path]
    else:
        sources = default_sources(os.getcwd())
        if not sources:
            where = claude_projects_dir() / project_slug(os.getcwd())
            print(f"memory-anchor: no Claude Code history for {os.getcwd()} (looked in {where})", file=sys.stderr)
            return 1
        if not args.all_projects:
            project = project_for_cwd(os.getcwd()) or os.getcwd()
    if args.dismiss:
        return _dismiss(args, sources)
    report = run_import(client(args), sources, claude=args.claude, wait_index=args.wait, progress=Progress(),
                        project=project)  # fmt: skip
    text = [f"imported {report.sessions} sessions from {', '.join(str(s) for s in sources)}: "
            f"{report.accepted:,} new events, {report.duplicates:,} already imported"]  # fmt: skip
    if report.not_transcripts:
        text.append(f"skipped {len(report.not_transcripts)} files that are not Claude Code transcripts: "
                    + "; ".join(f"{Path(name).name}: {why}" for name, why in report.not_transcripts[:5])
                    + (" ..." if len(report.not_transcripts) > 5 else ""))  # fmt: skip
    if report.failed:
        text.append(f"could not import {len(report.failed)} files: "
                    + "; ".join(f"{name}: {why}" for name, why in report.failed[:5])
                    + (" ..." if len(report.failed) > 5 else ""))  # fmt: skip
    if report.other_projects:
        text.append(f"left out {len(report.other_projects)} sessions of other projects (--all-projects imports them): "
                    + "; ".join(f"{Path(name).name}: {where}" for name, where in report.other_projects[:5]))  # fmt: skip
    if len(report.projects) > 1 or (report.projects and project is None):
        text.append("filed under " + ", ".join(f"{where} ({n} sessions)" for where, n in report.projects.items()))
    if report.skipped_sessions:
        text.append(f"left out {len(report.skipped_sessions)} sessions the hooks captured live")
    if report.no_conversation:
        text.append(f"{report.no_conversation} files held no conversation of their own "
                    "(a resumed session's copy of one imported, or a session left at once)")
    if report.refused:
        text.append(f"refused {len(report.refused)} events: " + "; ".join(report.refused[:3]))
    if report.left_to_embed:
        text.append(f"{report.left_to_embed:,} records are being embedded for search in the background; "
                    "keyword search finds them meanwhile")  # fmt: skip
    emit(args, report.__dict__, "\n".join(text))
    return 0


def _dismiss(args: argparse.Namespace, sources: list[Path]) -> int:
    from memory_anchor.core import paths
    from memory_anchor.worker.capture.history_offer import dismiss

    folders = [source if source.is_dir() else source.parent for source in sources]
    dismiss(Path(args.data_dir) if args.data_dir else paths.data_dir(), folders)
    emit(args, {"dismissed": [str(f) for f in folders]},
         f"new sessions will no longer offer to import the sessions in {', '.join(str(f) for f in folders)}; "
         "`memory-anchor import-history` still imports them whenever you like")  # fmt: skip
    return 0
