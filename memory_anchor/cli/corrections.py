"""`memory-anchor forget|edit|forgotten`: correct memory in one step.

Ids as the briefing prints them: `fact 1a2b3c4d` (or just 1a2b3c4d) for a rule,
decision, preference or other fact, `step 12` for an open next step. What is
forgotten leaves the briefing, recall and search at once and stays out when the
same words are extracted again; `memory-anchor forgotten` lists who forgot or
edited what, and when. Inside Claude Code the agent uses the forget_memory and
edit_memory tools instead, so the history says an agent did it.
"""

from __future__ import annotations

import argparse
import sys

from memory_anchor.cli.human import human_name, refuse_inside_agent
from memory_anchor.cli.main import client, emit
from memory_anchor.client.worker_client import WorkerError
from memory_anchor.schemas.corrections import ItemRefError, correction_path

INSIDE_AGENT = "Inside Claude Code, Claude forgets and edits with the forget_memory and edit_memory tools"


def register(sub) -> None:
    forget = sub.add_parser("forget", help="forget facts or next steps (ids as the briefing shows them)",
                            description="Forget each item: gone from the briefing, recall and search, and not brought "
                            "back by extracting the same words again. ID: `fact 1a2b3c4d`, `1a2b3c4d` or `step 12`.")  # fmt: skip
    forget.add_argument("ids", nargs="+", metavar="ID", help="`fact 1a2b3c4d`, `1a2b3c4d` or `step 12`")
    forget.add_argument("--reason", help="why (kept in the history)")
    forget.add_argument("--project", help="where to look up a short fact id (default: every project)")
    forget.set_defaults(handler=forget_items)

    edit = sub.add_parser("edit", help="replace a fact's or next step's text with yours",
                          description="A new version with your text (a fact keeps its category); the old wording is "
                          "kept out like a forgotten one. ID: `fact 1a2b3c4d`, `1a2b3c4d` or `step 12`.")  # fmt: skip
    edit.add_argument("words", nargs="+", metavar="ID TEXT", help="the item (`fact 1a2b3c4d`, `step 12`), then its new text")
    edit.add_argument("--reason", help="why (kept in the history)")
    edit.add_argument("--project", help="where to look up a short fact id (default: every project)")
    edit.set_defaults(handler=edit_item)

    forgotten = sub.add_parser("forgotten", help="what was forgotten or edited away, by whom and when")
    forgotten.add_argument("--project")
    forgotten.add_argument("--kind", choices=["fact", "next_step"])
    forgotten.add_argument("-n", "--limit", type=int, default=50)
    forgotten.add_argument("--purge", type=int, metavar="ID",
                           help="erase entry ID's text for good (the number the list shows as #ID): from every version "
                           "of the item, the keyword index, the vectors and this list; the same words stay out")  # fmt: skip
    forgotten.set_defaults(handler=list_forgotten)


def _path(ref: str, action: str) -> str:
    try:
        return correction_path(ref, action)  # type: ignore[arg-type]
    except ItemRefError as exc:
        raise WorkerError(str(exc), code="invalid_id") from None


def _who(args: argparse.Namespace) -> dict:
    return {k: v for k, v in {"actor": human_name(), "reason": args.reason, "project": args.project}.items() if v}


def _ids(values: list[str]) -> list[str]:
    """`fact 1a2b3c4d step 12` typed without quotes arrives as four words: pair a label with its id."""
    out: list[str] = []
    for value in values:
        if out and out[-1].strip().lower() in ("fact", "step"):
            out[-1] = f"{out[-1]} {value}"
        else:
            out.append(value)
    return out


def forget_items(args: argparse.Namespace) -> int:
    refuse_inside_agent("forget", INSIDE_AGENT, code="use_the_tool")
    api, done, failed = client(args), [], 0
    for ref in _ids(args.ids):
        try:
            done.append(api.post(_path(ref, "forget"), _who(args)))
        except WorkerError as exc:  # the others are still forgotten
            print(f"memory-anchor: {ref}: {exc}", file=sys.stderr)
            failed += 1
    emit(args, done, "\n".join(f"forgot {d['ref']}: {d['text']}" for d in done) or "nothing was forgotten")
    return 1 if failed else 0


def edit_item(args: argparse.Namespace) -> int:
    refuse_inside_agent("edit", INSIDE_AGENT, code="use_the_tool")
    if len(args.words) < 2:
        raise WorkerError("give the item and its new text: memory-anchor edit 'fact 1a2b3c4d' \"new text\"", code="usage")
    ref, text = " ".join(args.words[:-1]), args.words[-1]
    out = client(args).post(_path(ref, "edit"), {**_who(args), "text": text})
    emit(args, out, f"edited {out['ref']}: {out['text']}\n  was: {out['previous_text']}")
    return 0


def list_forgotten(args: argparse.Namespace) -> int:
    if args.purge is not None:
        return purge_forgotten(args)
    params = {k: v for k, v in {"project": args.project, "kind": args.kind, "limit": args.limit}.items() if v}
    rows = client(args).get("/api/v1/forgotten", **params)["results"]
    lines = [f"#{r['id']} {r['action']:>6} {'step ' + r['item_id'] if r['kind'] == 'next_step' else 'fact ' + r['item_id'][:8]}"
             f" by {r['actor']} ({_when(r['created_at'])}){': ' + r['reason'] if r.get('reason') else ''}\n"
             f"       {'[purged]' if r.get('purged') else r['text']}" for r in rows]  # fmt: skip
    emit(args, rows, "\n".join(lines) or "nothing was forgotten")
    return 0


def purge_forgotten(args: argparse.Namespace) -> int:
    out = client(args).post(f"/api/v1/forgotten/{args.purge}/purge", {})
    what = f"{out['versions']} versions of the fact" if out["kind"] == "fact" else f"{out['open_items']} next steps"
    emit(args, out, f"purged #{', #'.join(str(i) for i in out['forgotten_ids'])}: its text is erased from {what}, "
                    f"the keyword index, {out['vectors']} vectors and the forgotten list (the same words stay out)")
    return 0


def _when(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))
