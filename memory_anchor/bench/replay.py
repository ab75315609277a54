"""`memory-anchor bench replay DIR`: what importing a folder of real sessions gives.

The folder's Claude Code transcripts go through the importer (memory_anchor/cli/history_import.py)
into a real worker on a throw-away data dir and a free port, distilled locally unless
`--claude`. Then, read the way a session reads memory (the endpoints the SessionStart and
UserPromptSubmit hooks call, or the hooks themselves, and the MCP `search` tool through
the real `mcp` client and the stdio bridge .mcp.json starts), it prints:

- every rule and decision the briefing lists, with its source (the session, the user's
  quote), so a reader can judge each one;
- how many open next steps and facts the briefing lists (and memory holds), each printed;
- for the sessions of the folder's `probes.jsonl` that changed files: whether per-prompt
  recall, and the search's top 10, name a file the session changed when asked how its
  issue was fixed;
- the folder's `qa.jsonl` questions asked through per-prompt recall and search, and questions
  whose answer memory lacks through recall (memory_anchor/bench/qa.py);
- the briefing's size, and whether its session lines name the last five sessions'
  subjects and changed files; whether Claude Code's own text shows as the user's words;
- import time (until everything is processed and embedded), the worker's CPU seconds
  (a figure a loaded machine distorts less than wall time) and its RSS.

`probes.jsonl`, one line a session: `session_id`, `title` (the issue's first line),
`agent_files` (what the session's own patch changed: what memory can know). See
shared/bench/replay/README.md. The goals are those docs/benchmarks.md gives for a replay.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_anchor.bench import qa
from memory_anchor.bench.rule_labels import instruction_lines
from memory_anchor.client.worker_client import WorkerError
from memory_anchor.worker.memory.text import names_a_subject as text_names_a_subject

ROOT = Path(__file__).resolve().parents[2]
PROBE = 'How did we fix "{title}" before? Which files did we change?'
# Claude Code's own text, which must never show as what the user asked or said.
CLAUDE_CODE_TEXT = ("Caveat: The messages below", "<command-name>", "<command-message>", "<local-command",
                    "<system-reminder>", "[Request interrupted", "<task-notification>", "Base directory for this skill",
                    "<bash-input>", "<bash-stdout>", "<ide_opened_file>", "<ide_selection>")  # fmt: skip
GOALS = {"rules": 2, "next_steps": 5, "recall": 0.95, "search": 0.92, "chars": 10_000, "last_sessions": 4,
         "claude_code_text": 0, "import_seconds": 30.0}  # fmt: skip
_FACT_REF = re.compile(r"[(;] ?fact ([0-9a-f]{8})\)")  # "(fact …)" of a rule, "(said …; fact …)" of one said once


@dataclass
class Probe:
    session_id: str
    title: str
    files: list[str]  # the files the session's own patch changed, relative to the project


def read_probes(folder: Path) -> dict[str, Probe]:
    path = folder / "probes.jsonl"
    if not path.exists():
        return {}
    probes = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            probes[row["session_id"]] = Probe(row["session_id"], row["title"], list(row.get("agent_files") or []))
    return probes


def names_a_file(text: str, files: list[str]) -> bool:
    """Whether `text` names one of `files` (by its path in the project, absolute or not). A path
    written on Windows names its file with either separator and in any case (`e:\\a\\b.md` is `E:/a/b.md`)."""
    said = text.replace("\\", "/").casefold()
    return any(f.replace("\\", "/").casefold() in said for f in files)


def sections(briefing: str) -> dict[str, list[str]]:
    """The briefing's sections: title -> its "- " lines."""
    out: dict[str, list[str]] = {}
    title = ""
    for line in briefing.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            out[title] = []
        elif line.startswith("- ") and title:
            out[title].append(line)
    return out


def section(parts: dict[str, list[str]], starts: str) -> list[str]:
    return next((lines for title, lines in parts.items() if title.startswith(starts)), [])


def typed_part(title: str) -> str:
    """A title without the tagged blocks an editor or a command put around what the person typed."""
    return re.sub(r"<([\w-]+)[^>]*>.*?</\1>", " ", title, flags=re.DOTALL)


def names_a_subject(title: str) -> bool:
    """A probe's title a question can be asked about: words a person wrote, three or more. A session
    that opens with a slash command, Claude Code's own text or "yes" / "continue" has a title no
    question can point at, whatever memory holds."""
    typed = typed_part(title)
    return not any(marker in typed for marker in CLAUDE_CODE_TEXT) and text_names_a_subject(typed)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_]{3,}", text.lower())}


def names_session(lines: list[str], probe: Probe) -> bool:
    """A session line names the session's subject (most of its title's words) and a file it changed."""
    title = _words(typed_part(probe.title))
    for line in lines:
        said = _words(line)
        if title and len(title & said) >= 0.6 * len(title) and names_a_file(line, probe.files):
            return True
    return False


def claude_code_text(texts: list[str]) -> list[str]:
    return [t for t in texts if any(marker in t for marker in CLAUDE_CODE_TEXT)]


def worker_process(data_dir: Path) -> dict[str, float]:
    """The worker's CPU seconds (its Chroma process's included), RSS and peak RSS (MB), from /proc (empty elsewhere)."""
    from memory_anchor.bench.ingest import cpu_seconds

    try:
        pid = json.loads((data_dir / "worker.json").read_text())["pid"]
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    except (OSError, ValueError, KeyError):
        return {}
    cpu = cpu_seconds(pid)
    if cpu is None:
        return {}
    return {"cpu_seconds": cpu,
            "rss_mb": int(status["VmRSS"].split()[0]) / 1024, "peak_rss_mb": int(status["VmHWM"].split()[0]) / 1024}  # fmt: skip


async def _search_top10(env: dict[str, str], queries: list[str]) -> list[str]:
    """The MCP `search` tool's answers (top 10), through the real `mcp` client and the stdio bridge."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    bridge = StdioServerParameters(command=sys.executable, args=["-S", str(ROOT / "memory_anchor" / "mcp" / "server.py")],
                                   env=env, cwd=str(ROOT))  # fmt: skip
    out = []
    # The bridge's stderr goes nowhere: under a test runner ours is no file a process can write to.
    with open(os.devnull, "w") as quiet:
        async with stdio_client(bridge, errlog=quiet) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                # The worker loads the MCP SDK when the first bridge connects; on a loaded machine that first
                # hand-over can take longer than the bridge waits. Measured here: what search answers, not that.
                await client.call_tool("search", {"query": "warm-up", "limit": 1})
                for query in queries:
                    result = await client.call_tool("search", {"query": query, "limit": 10})
                    out.append("\n".join(getattr(block, "text", "") for block in result.content))
    return out


def measure(folder: Path, work: Path, *, claude: bool = False, quick: int | None = None, via: str = "api",
            progress=None, labels: bool = False) -> dict[str, Any]:  # fmt: skip
    """Import the folder's sessions (the last `quick` of them) into a fresh worker and read what it gives."""
    from memory_anchor.bench.context import Run
    from memory_anchor.cli.history_import import Progress, import_history
    from memory_anchor.worker.capture.history import session_files

    found = session_files(folder)
    files = found.files[-quick:] if quick else found.files
    probes = read_probes(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_ANCHOR_")}
    if not claude:  # the local path: no key, no login, so nothing can reach Claude
        env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
        env["MEMORY_ANCHOR_LLM_ROUTE"] = "local"
    env["MEMORY_ANCHOR_DATA_DIR"] = str(work / "data")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    figures: dict[str, Any] = {"folder": str(folder), "sessions": len(files), "path": "claude" if claude else "local",
                               "not_transcripts": [(p.name, why) for p, why in found.skipped]}  # fmt: skip
    with Run(work, env) as run:
        report = import_history(run.client, files, claude=claude, wait_index=True, progress=progress or Progress(quiet=True))
        figures.update(events=report.events, accepted=report.accepted, refused=len(report.refused),
                       import_seconds=report.indexed_seconds, processed_seconds=report.processed_seconds,
                       sent_seconds=report.sent_seconds, **worker_process(run.data_dir))  # fmt: skip
        last_session = _last_session_in_a_project(run, files)
        cwd, project = last_session.get("cwd") or str(run.work), last_session.get("project") or ""
        briefing = run.context_at(cwd, via)
        parts = sections(briefing)
        facts = {f["id"][:8]: f for f in run.client.get("/api/v1/facts", project=project, limit=1000)["results"]}
        figures["briefing"] = briefing
        figures["chars"] = len(briefing)
        said_once = run.client.get("/api/v1/facts", project=project, status="pending", limit=1000)["results"]
        known = {**facts, **{f["id"][:8]: f for f in said_once}}  # a said-once line's fact is pending
        figures["rules"] = [_with_source(line, known) for line in instruction_lines(briefing)]
        figures["next_steps"] = section(parts, "Open next steps")
        figures["facts"] = section(parts, "Verified facts")
        figures["stored"] = {"facts": len(facts),
                             "open_next_steps": len(run.client.get("/api/v1/next-steps", project=project, limit=1000)["results"])}  # fmt: skip
        sessions_lines = section(parts, "Last sessions")
        ids = [_session_id(f) for f in files]
        last = [probes[s] for s in ids[-5:] if s in probes]
        figures["last_sessions"] = {"named": [p.title for p in last if names_session(sessions_lines, p)],
                                    "missed": [p.title for p in last if not names_session(sessions_lines, p)]}  # fmt: skip
        prompts = [p.get("memory") or p.get("text") or "" for p in run.client.get("/api/v1/prompts", limit=1000)["results"]]
        asked = [line.split("asked: ", 1)[1] for line in sessions_lines if "asked: " in line]
        figures["claude_code_text"] = claude_code_text(prompts + asked)
        patched = [probes[s] for s in ids if s in probes and probes[s].files]
        queries = [PROBE.format(title=p.title) for p in patched]
        recalls = [run.recall_at(cwd, q, via) for q in queries]
        searches = asyncio.run(_search_top10({**env, "CLAUDE_PROJECT_DIR": cwd, "CLAUDE_CODE_SESSION_ID": "bench-replay"},
                                             queries)) if queries else []  # fmt: skip
        by_id = {_session_id(f): f for f in files}
        # The REST search's whole hits too, as the questions are scored: the MCP tool shows each hit's start.
        rest = ["\n".join(f"{h.get('title') or ''}\n{h.get('memory') or ''}" for h in
                          run.client.post("/api/v1/memories/search", {"query": q, "top_k": 10,
                                                                      "filters": {"project": project}})["results"])
                for q in queries]  # fmt: skip
        figures["probes"] = [{"title": p.title, "files": p.files, "recall": names_a_file(r, p.files),
                              "search": names_a_file(s, p.files), "search_rest": names_a_file(w, p.files),
                              "search_answer": s[:600],
                              "written": bool(set(p.files) & written_files(by_id[p.session_id])),
                              "subject": names_a_subject(p.title)}
                             for p, r, s, w in zip(patched, recalls, searches, rest)]  # fmt: skip
        figures["qa"] = qa.measure(qa.read_questions(folder), lambda q: run.recall_at(cwd, q, via),
                                   lambda q: run.client.post("/api/v1/memories/search", {"query": q, "top_k": 10,
                                                             "filters": {"project": project}})["results"])  # fmt: skip
        if labels:
            figures["all_rules"] = standing_statements_of_every_project(run, files, via)
        figures.update({f"after_{k}": v for k, v in worker_process(run.data_dir).items()})
    rows = figures["probes"]
    figures["recall"] = sum(r["recall"] for r in rows) / len(rows) if rows else None
    figures["search"] = sum(r["search"] for r in rows) / len(rows) if rows else None
    written = [r for r in rows if r["written"]]
    figures["written"] = {"sessions": len(written), "recall": sum(r["recall"] for r in written),
                          "search": sum(r["search"] for r in written)}  # fmt: skip
    subject = [r for r in rows if r.get("subject")]
    figures["subject"] = {"sessions": len(subject), "recall": sum(r["recall"] for r in subject),
                          "search": sum(r["search"] for r in subject)}  # fmt: skip
    return figures


def _last_session_in_a_project(run, files: list[Path]) -> dict[str, Any]:
    """The latest session that has a project: a transcript of only a local command's caveat gives
    a session with no working directory, and its briefing would be that of no project."""
    session: dict[str, Any] = {}
    for path in reversed(files):
        try:
            session = run.client.get(f"/api/v1/sessions/{_session_id(path)}")
        except WorkerError:
            continue
        if session.get("project"):
            return session
    return session


def standing_statements_of_every_project(run, files: list[Path], via: str) -> dict[str, list[dict[str, Any]]]:
    """The rules, decisions and preferences each project's briefing lists, and those waiting for approval
    ({text, quote, session}): a folder of one person's sessions spans their projects."""
    cwds: dict[str, str] = {}
    for path in files:
        try:
            session = run.client.get(f"/api/v1/sessions/{_session_id(path)}")
        except WorkerError:  # a transcript that gave no event (only a sidechain's, say) is no session
            continue
        cwds.setdefault(session["project"], session.get("cwd") or str(run.work))
    briefed, pending = [], []
    for project, cwd in cwds.items():
        waiting = run.client.get("/api/v1/facts", project=project, status="pending", limit=1000)["results"]
        # the briefing's said-once lines are pending facts: their quote and session are found there
        facts = {f["id"][:8]: f for f in run.client.get("/api/v1/facts", project=project, limit=1000)["results"] + waiting}
        for line in instruction_lines(run.context_at(cwd, via)):
            rule = _with_source(line, facts)
            briefed.append({"text": rule["text"] or line, "line": line, "quote": rule["quote"], "session": rule["session"]})
        for fact in waiting:
            if fact.get("type") in STANDING_TYPES:
                pending.append({"text": fact["text"], "quote": (fact.get("data") or {}).get("quote"), "session": fact.get("session_id")})
    return {"briefed": briefed, "pending": pending}


STANDING_TYPES = ("rule", "decision", "preference")


def written_files(transcript: Path) -> set[str]:
    """The files the session's transcript says it wrote, as the project names them: all memory can know was
    changed. The files capture keeps as changed (`files_modified`): a writing tool's file, one a Bash command
    line writes or its output says a tool wrote (memory_anchor/worker/pipeline/compress/shell_files.py). A patch may also hold
    what no line says was written: a database file a script's run created, a change made outside the transcript."""
    from memory_anchor.core.projects import relative
    from memory_anchor.worker.capture.history import session_events
    from memory_anchor.worker.pipeline.compress.local import compress_tool_use

    out = set()
    for event in session_events(transcript):
        payload = event.payload
        if payload.get("hook_event_name") == "PostToolUse":
            out.update(relative(path, payload.get("cwd")) for path in compress_tool_use(payload).files_modified)
    return out


def _session_id(path: Path) -> str:
    from memory_anchor.worker.capture.history import session_id_of

    return session_id_of(path)


def _with_source(line: str, facts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ref = _FACT_REF.search(line)
    fact = facts.get(ref.group(1)) if ref else None
    data = (fact or {}).get("data") or {}
    return {"line": line, "text": (fact or {}).get("text"), "session": (fact or {}).get("session_id") or data.get("session_id"),
            "source": (fact or {}).get("source") or data.get("source"), "quote": data.get("quote")}  # fmt: skip


def goals(figures: dict[str, Any]) -> dict[str, tuple[Any, Any, bool]]:
    """Each goal of a replay: (measured, goal, met)."""

    def at_least(value, goal):
        return value is None or value >= goal

    rows = {
        "rules and decisions briefed": (len(figures["rules"]), f"<= {GOALS['rules']}", len(figures["rules"]) <= GOALS["rules"]),
        "open next steps briefed": (len(figures["next_steps"]), f"<= {GOALS['next_steps']}",
                                    len(figures["next_steps"]) <= GOALS["next_steps"]),
        "recall names a changed file": (_pct(figures["recall"]), f">= {GOALS['recall']:.0%}", at_least(figures["recall"], GOALS["recall"])),
        "search top 10 names one": (_pct(figures["search"]), f">= {GOALS['search']:.0%}", at_least(figures["search"], GOALS["search"])),
        "briefing characters": (figures["chars"], f"<= {GOALS['chars']:,}", figures["chars"] <= GOALS["chars"]),
        "last 5 sessions named (subject + file)": (len(figures["last_sessions"]["named"]), f">= {GOALS['last_sessions']}",
                                                   len(figures["last_sessions"]["named"]) >= min(GOALS["last_sessions"], figures["sessions"])),
        "Claude Code text as the user's words": (len(figures["claude_code_text"]), "0", not figures["claude_code_text"]),
    }  # fmt: skip
    rows.update(qa.goals(figures["qa"]))
    seconds = figures.get("import_seconds")
    rows["import seconds (processed + embedded)"] = (None if seconds is None else round(seconds, 1),
                                                     f"<= {GOALS['import_seconds']:.0f} quiet", seconds is not None and seconds <= GOALS["import_seconds"])  # fmt: skip
    return rows


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def report(figures: dict[str, Any], *, show_briefing: bool = False) -> bool:
    """Print the figures; True when every goal is met."""
    print(f"\n== {figures['folder']}: {figures['sessions']} sessions, {figures['events']:,} events, {figures['path']} path")
    for name, why in figures["not_transcripts"]:
        print(f"   skipped {name}: {why}")
    print(f"import: {figures['import_seconds']:.1f} s until processed and embedded (read and sent in "
          f"{figures['sent_seconds']:.1f} s, processed at {figures['processed_seconds']:.1f} s); worker CPU "
          f"{figures.get('cpu_seconds', 0):.1f} s, RSS {figures.get('rss_mb', 0):.0f} MB (peak {figures.get('peak_rss_mb', 0):.0f} MB)")  # fmt: skip
    print(f"\nrules and decisions in the briefing: {len(figures['rules'])}")
    for rule in figures["rules"]:
        print(f"  {rule['line']}\n      source: {rule['source']}, session {rule['session']}, the user's words: {rule['quote']!r}")
    print(f"open next steps in the briefing: {len(figures['next_steps'])} (open in memory: {figures['stored']['open_next_steps']})")
    for line in figures["next_steps"]:
        print(f"  {line}")
    print(f"facts in the briefing: {len(figures['facts'])} (active in memory: {figures['stored']['facts']})")
    for line in figures["facts"]:
        print(f"  {line}")
    last = figures["last_sessions"]
    print(f"briefing: {figures['chars']:,} characters; the last sessions named with subject and changed file: "
          f"{len(last['named'])} of {len(last['named']) + len(last['missed'])}")  # fmt: skip
    for title in last["missed"]:
        print(f"  not named: {title}")
    for text in figures["claude_code_text"]:
        print(f"  Claude Code's text as the user's words: {text[:120]!r}")
    rows = figures["probes"]
    print(f"probes (sessions with a patch): {len(rows)}; recall names a changed file {sum(r['recall'] for r in rows)}, "
          f"search top 10 {sum(r['search'] for r in rows)} (the MCP tool's lines; the REST search's whole hits "
          f"{sum(bool(r.get('search_rest')) for r in rows)})")  # fmt: skip
    written = figures["written"]
    print(f"  of the {written['sessions']} whose transcript says a file of their patch was written (what memory "
          f"can know): recall {written['recall']}, search {written['search']}")  # fmt: skip
    subject = figures.get("subject")
    if subject:
        print(f"  of the {subject['sessions']} whose title names a subject (three words or more a person wrote, not a "
              f"slash command or Claude Code's text): recall {subject['recall']}, search {subject['search']}")  # fmt: skip
    for row in rows:
        which = " and ".join(name for name in ("recall", "search") if not row[name])
        if which:
            print(f"  {'' if row['written'] else '(no line says these were written) '}missed by {which}: {row['title']} ({', '.join(row['files'])})")
    missed = next((row for row in rows if not row["search"]), None)
    if missed is not None:  # what a miss looks like: the search's own answer, for a reader to judge
        print(f"  the search's answer to the first it missed ({missed['title']}):\n    "
              + missed["search_answer"].replace("\n", "\n    "))  # fmt: skip
    qa.report(figures["qa"])
    if show_briefing:
        print("\n" + figures["briefing"])
    print(f"\n{'goal':42} {'measured':>10}  goal")
    ok = True
    for name, (value, goal, met) in goals(figures).items():
        print(f"{name:42} {str(value):>10}  {goal}  {'met' if met else 'MISSED'}")
        ok = ok and met
    return ok


def report_labels(labels, rules: dict[str, list[dict[str, Any]]]) -> None:
    """Precision and recall of the standing rules against a reader's labels: in all, then per half."""
    from memory_anchor.bench.rule_labels import Instructions, score, score_instructions
    from memory_anchor.bench.rule_labels import report as print_scope

    print("\nstanding rules against the labels (every project's briefing)")
    if isinstance(labels, Instructions):
        print_scope("all", score_instructions(labels, rules["briefed"]), score_instructions(labels, rules["pending"]))
        return
    halves = sorted({label.half for label in labels if label.half})
    for half in [None, *halves]:
        print_scope(half or "all", score(labels, rules["briefed"], half), score(labels, rules["pending"], half))


def run(args) -> int:
    from memory_anchor.bench.rule_labels import read_labels
    from memory_anchor.cli.history_import import Progress

    folder = Path(args.dir)
    if not folder.is_dir():
        print(f"memory-anchor: {folder} is not a folder of transcripts", file=sys.stderr)
        return 2
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ma-bench-replay-"))
    print(f"Memory Anchor replay benchmark: {folder}, data under {work}", flush=True)
    started = time.monotonic()
    labels = read_labels(args.labels) if getattr(args, "labels", None) else None
    figures = measure(folder, work, claude=args.claude, quick=args.quick, via=args.via, progress=Progress(),
                      labels=labels is not None)  # fmt: skip
    ok = report(figures, show_briefing=args.show_briefing)
    if labels is not None:
        report_labels(labels, figures["all_rules"])
    print(f"\n{'goals met' if ok else 'goals NOT met'} ({time.monotonic() - started:.0f} s in all)")
    return 0 if ok else 1
