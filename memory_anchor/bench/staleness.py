"""`memory-anchor bench staleness [--quick]`: are memories about code marked when the code moved on?

Scripted git histories (real repositories, real `git`), one per project. A
real worker on a throw-away data dir receives each project's sessions through
its hook-event API, as the hooks post them: the session reads files, edits
others (the files on disk change as its Edit says), leaves a root cause and
next steps, and its work is committed. Then commits outside any session give
every file a fate:

- fresh controls: untouched; changed on a branch that was never merged;
  changed and changed back (a revert);
- stale: changed; deleted; renamed (and renamed with a small edit); changed on
  a branch that was merged; changed in the working tree, not committed; for a
  file a session edited: its function rewritten, the session's change reverted
  by hand, other code added beside the edit;
- next steps: done by a commit that says so in its own words (a retry, a doc,
  a removal, tests, a rename, the changelog) or names only the effect while its
  diff does the step, or not done: half of it done, the file reformatted, the
  same work on another file, the work on an unmerged branch, done and then
  reverted, nothing at all.

Every memory the sessions left is then checked through `POST /api/v1/verify`
(what `memory-anchor verify` prints), the next briefing is asked for (it shows
the steps commits did as closed) and the maintenance job is run (it records them,
as the git watch does when HEAD moves). Printed: stale memories marked / missed,
fresh ones wrongly marked (by fate and by kind), next steps closed / missed /
wrongly closed, and the time the checks add to building the SessionStart
briefing of a project with 1,000 memories (the same data dir read with
`code_checks` on and off, in process; median of repeated builds, and the first
build after HEAD moved).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_anchor.bench.gitrepo import GitRepo

ROOT = Path(__file__).resolve().parents[2]
GOALS = {"stale_marked": 0.9, "fresh_wrong": 0.02, "steps_closed": 0.9, "steps_wrong": 0, "added_ms": 20.0}
STALE = {"changed", "deleted", "moved", "superseded"}

# Fates of a file a session read, and of one it edited: is a memory about it stale afterwards?
READ_FATES = {"untouched": False, "other_branch": False, "changed_back": False, "modified": True, "deleted": True,
              "renamed": True, "renamed_edited": True, "merged_branch": True, "uncommitted": True}  # fmt: skip
EDIT_FATES = {"untouched": False, "rewritten": True, "reverted": True, "appended": True, "deleted": True, "renamed": True}
# Per project: the fresh controls outnumber each stale fate (the untouched files most of all).
READ_PLAN = ["untouched"] * 5 + ["other_branch", "changed_back", "modified", "deleted", "renamed", "renamed_edited",
                                 "merged_branch", "uncommitted"]  # fmt: skip
EDIT_PLAN = ["untouched"] * 3 + ["rewritten", "reverted", "appended", "deleted", "renamed"]


def source(func: str, n: int) -> str:
    return (f'"""{func}: part of the shop."""\n\n\ndef {func}(amount):\n    total = amount + {n}\n'
            f"    return total\n")  # fmt: skip


@dataclass
class FileMemory:
    path: str
    fate: str
    edited: bool
    session: str
    func: str

    @property
    def stale(self) -> bool:
        return (EDIT_FATES if self.edited else READ_FATES)[self.fate]


@dataclass
class Step:
    text: str
    done: bool  # by a commit of the script
    why: str


@dataclass
class Project:
    name: str
    repo: GitRepo
    files: list[FileMemory] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    sessions: dict[str, list[FileMemory]] = field(default_factory=dict)
    root_causes: dict[str, FileMemory] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return str(self.repo.root.resolve())


# --- the scripted histories ---------------------------------------------------------------------


def step_plan(p: int) -> list[tuple[Step, Any]]:
    """Next steps and the commit (a function of the repo) that does them, or does something else."""
    helpers = f"src/helpers_{p}.py"

    def write(path, text, message):
        return lambda repo: repo.commit(message, files={path: text})

    def reverted(path, text, message):
        def do(repo):
            repo.commit(message, files={path: text})
            repo.git("revert", "--no-edit", "HEAD", at=repo.clock + 30)
        return do

    def on_branch(repo):
        repo.git("checkout", "-q", "-b", f"health-{p}")
        repo.commit("Add health check endpoint", files={f"src/server_{p}.py": "def health():\n    return 'ok'\n"})
        repo.git("checkout", "-q", "main")

    plan = [
        (Step(f"add a retry to fetch_user_{p} in src/client_{p}.py", True, "says it, touches the file"),
         write(f"src/client_{p}.py", f"def fetch_user_{p}(i, retries=3):\n    return i\n", f"Add retry to fetch_user_{p}")),
        (Step(f"document the CART_TTL_{p} setting in docs/setup_{p}.md", True, "another verb, the name in the diff"),
         write(f"docs/setup_{p}.md", f"# Setup\nCART_TTL_{p}: seconds a cart is kept.\n", f"docs: explain CART_TTL_{p}")),
        (Step(f"remove the deprecated legacy_total_{p} helper from {helpers}", True, "remove / drop"),
         write(helpers, "# helpers\n", f"Drop deprecated legacy_total_{p}")),
        (Step(f"write tests for parse_order_{p} in tests/test_orders_{p}.py", True, "a new test file"),
         write(f"tests/test_orders_{p}.py", f"def test_parse_order_{p}():\n    assert True\n", f"Test parse_order_{p}")),
        (Step(f"rename compute_{p} to compute_total_{p}", True, "no file named: the message says it all"),
         write(f"src/compute_{p}.py", f"def compute_total_{p}():\n    return 0\n", f"Rename compute_{p} to compute_total_{p}")),
        (Step(f"update the changelog for the 2.{p} release", True, "no file named"),
         write("CHANGELOG.md", f"## 2.{p}\n- totals\n", f"Update the changelog for the 2.{p} release")),
        (Step(f"add a timeout to load_stock_{p} in src/stock_io_{p}.py", True, "the message names the effect, the diff does it"),
         write(f"src/stock_io_{p}.py", f"def load_stock_{p}(i, timeout=5):\n    return i\n", "The stock page no longer hangs")),
        (Step(f"add a retry to save_order_{p} in src/save_{p}.py", False, "done, then reverted"), reverted(
            f"src/save_{p}.py", f"def save_order_{p}(order, retries=3):\n    return order\n", f"Add retry to save_order_{p}")),
        (Step(f"add a retry and a timeout to load_cart_{p} in src/cart_{p}.py", False, "half of it done"),
         write(f"src/cart_{p}.py", f"def load_cart_{p}(i, timeout=5):\n    return i\n", f"Add a timeout to load_cart_{p}")),
        (Step(f"add input validation to submit_order_{p} in src/orders_{p}.py", False, "its file reformatted"),
         write(f"src/orders_{p}.py", f"def submit_order_{p}(order):\n\n    return order\n", f"Reformat src/orders_{p}.py")),
        (Step(f"add caching to price_list_{p} in src/prices_{p}.py", False, "the same work on another file"),
         write(f"src/stock_{p}.py", f"def stock_list_{p}():\n    return cache()\n", f"Add caching to stock_list_{p}")),
        (Step(f"add a health check endpoint to src/server_{p}.py", False, "done on a branch never merged"), on_branch),
        (Step(f"migrate invoice_{p} to the new config loader", False, "nothing done"), None),
    ]  # fmt: skip
    return plan


def build_project(work: Path, p: int) -> tuple[Project, list[tuple[Step, Any]]]:
    repo = GitRepo(work / f"shop-{p}")
    project = Project(f"shop-{p}", repo)
    files: dict[str, str | None] = {}
    memories = [(fate, False) for fate in READ_PLAN] + [(fate, True) for fate in EDIT_PLAN]
    sessions = [f"bench-{p}-a-{uuid.uuid4().hex[:6]}", f"bench-{p}-b-{uuid.uuid4().hex[:6]}"]
    for i, (fate, edited) in enumerate(memories):
        func = f"{'edit' if edited else 'read'}_{fate}_{i}_{p}"
        path = f"{'app' if edited else 'lib'}/{func}.py"
        files[path] = source(func, i)
        memory = FileMemory(path, fate, edited, sessions[i % 2], func)
        project.files.append(memory)
        project.sessions.setdefault(memory.session, []).append(memory)
    for sid in sessions:
        edited = [m for m in project.sessions[sid] if m.edited]
        # One root cause per session: about a file that stays (a) and one that goes (b).
        project.root_causes[sid] = next(m for m in edited if m.fate == ("untouched" if sid == sessions[0] else "deleted"))
    plan = step_plan(p)
    for path in (f"src/client_{p}.py", f"docs/setup_{p}.md", f"src/helpers_{p}.py", f"src/compute_{p}.py",
                 "CHANGELOG.md", f"src/cart_{p}.py", f"src/orders_{p}.py", f"src/prices_{p}.py", f"src/stock_{p}.py",
                 f"src/stock_io_{p}.py", f"src/save_{p}.py"):  # fmt: skip
        files.setdefault(path, f"# {path}\n")
    repo.commit("Start the shop", files=files)
    project.steps = [step for step, _ in plan]
    return project, plan


def edited_text(memory: FileMemory) -> tuple[str, str]:
    n = memory.func.split("_")[-2]
    return f"    total = amount + {n}\n", f"    total = round((amount + {n}) * 1.2, 2)  # {memory.func}: tax included\n"


def play_sessions(run, project: Project) -> None:
    """Each session as Claude Code would post it: reads, edits (the file changes on disk first), the end."""
    half = len(project.steps) // 2
    for index, (sid, memories) in enumerate(project.sessions.items()):
        post = _poster(run, project, sid)
        post("SessionStart", source="startup")
        post("UserPromptSubmit", prompt=f"fix the totals of {project.name}", permission_mode="default")
        for n, memory in enumerate(memories):
            full = f"{project.root}/{memory.path}"
            content = (project.repo.root / memory.path).read_text()
            if not memory.edited:
                post("PostToolUse", tool_name="Read", tool_use_id=f"toolu_{sid}_{n}", tool_input={"file_path": full},
                     tool_response={"type": "text", "file": {"filePath": full, "content": content, "startLine": 1,
                                                              "numLines": content.count("\n"),
                                                              "totalLines": content.count("\n")}})  # fmt: skip
                continue
            old, new = edited_text(memory)
            (project.repo.root / memory.path).write_text(content.replace(old, new))
            post("PostToolUse", tool_name="Edit", tool_use_id=f"toolu_{sid}_{n}",
                 tool_input={"file_path": full, "old_string": old, "new_string": new},
                 tool_response={"filePath": full, "oldString": old, "newString": new})  # fmt: skip
        cause = project.root_causes[sid]
        steps = project.steps[:half] if index == 0 else project.steps[half:]
        last = (f"Fixed the totals in {cause.path}.\n\nRoot cause: `{cause.func}` in {cause.path} added the tax "
                f"before rounding.\n\nNext steps:\n" + "\n".join(f"- {s.text}" for s in steps))  # fmt: skip
        post("Stop", stop_hook_active=False, last_assistant_message=last)
        post("SessionEnd", reason="other")
    run.settle()
    project.repo.commit("Save the session's work")


def _poster(run, project: Project, sid: str):
    def post(event: str, **fields: Any) -> None:
        run.client.post("/api/v1/events", {"hook_event_name": event, "session_id": sid, "cwd": project.root,
                                           "transcript_path": str(run.work / f"{sid}.jsonl"), **fields})  # fmt: skip
        # Posted at a session's pace, no waiting: a Read keeps the blob of what it read, an Edit of what it
        # put in (memory_anchor/worker/codebase/refs.py), whenever the worker gets to the event.

    return post


def drained(run, timeout: float = 120.0) -> None:
    """Wait until the worker has processed every event posted so far (not their vectors)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        inbox = run.client.get("/api/v1/status").get("inbox") or {}
        if not any(v for k, v in inbox.items() if k not in ("done", "failed")):
            return
        time.sleep(0.01)
    raise TimeoutError("the worker did not process the session's events in time")


def apply_fates(project: Project, plan: list[tuple[Step, Any]]) -> None:
    """The commits outside any session: every file's fate, then the steps' commits."""
    repo = project.repo
    for memory in project.files:
        path, fate, func = memory.path, memory.fate, memory.func
        text = (repo.root / path).read_text()
        stem = path[:-3]
        if fate == "untouched":
            continue
        if fate == "modified":
            repo.commit(f"Log {func}", files={path: text.replace("    return total", "    log(total)\n    return total")})
        elif fate == "deleted":
            repo.commit(f"Remove {func}", files={path: None})
        elif fate == "renamed":
            repo.git("mv", path, f"{stem}_moved.py")
            repo.commit(f"Move {func}")
        elif fate == "renamed_edited":
            repo.git("mv", path, f"{stem}_moved.py")
            repo.commit(f"Move {func}", files={f"{stem}_moved.py": text + "\n# moved\n"})
        elif fate in ("other_branch", "merged_branch"):
            branch = f"try-{func}"
            repo.git("checkout", "-q", "-b", branch)
            repo.commit(f"Try {func}", files={path: text.replace("return total", "return -total")})
            repo.git("checkout", "-q", "main")
            if fate == "merged_branch":
                repo.clock += 60
                repo.git("merge", "-q", "--no-ff", "-m", f"Merge {branch}", branch, at=repo.clock)
        elif fate == "changed_back":
            repo.commit(f"Try {func}", files={path: text.replace("return total", "return total * 2")})
            repo.commit(f"Revert the {func} try", files={path: text})
        elif fate == "rewritten":
            repo.commit(f"Rewrite {func}", files={path: f"def {func}(amount):\n    return Decimal(amount).quantize(CENTS)\n"})
        elif fate == "reverted":
            old, new = edited_text(memory)
            repo.commit(f"Back out the {func} change", files={path: text.replace(new, old)})
        elif fate == "appended":
            repo.commit(f"Add a helper beside {func}", files={path: text + "\n\ndef helper():\n    return 1\n"})
    for _, do in plan:
        if do is not None:
            do(repo)
    for memory in project.files:  # last: what nobody committed yet
        if memory.fate == "uncommitted":
            target = repo.root / memory.path
            target.write_text(target.read_text() + "# work in progress\n")


# --- what the worker says -------------------------------------------------------------------------


def score_memories(project: Project, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each memory the sessions left, its truth and the state the worker gave it (None: not checked)."""
    checked = report["stale"] + report["fresh"]
    rows = []
    for memory in project.files:
        full = f"{project.root}/{memory.path}"
        found = next((c for c in checked if c["kind"] == "observation" and full in c["line"]), None)
        rows.append(_row("observation", memory.fate, memory.stale, found))
    for sid, memories in project.sessions.items():
        found = next((c for c in checked if c["kind"] == "summary" and c.get("session_id") == sid), None)
        rows.append(_row("summary", "session", any(m.stale for m in memories if m.edited), found))
        cause = project.root_causes[sid]
        found = next((c for c in checked if c["kind"] == "fact" and cause.path in c["line"]), None)
        rows.append(_row("fact", cause.fate, cause.stale, found))
    return rows


def _row(kind: str, fate: str, stale: bool, found: dict[str, Any] | None) -> dict[str, Any]:
    state = found["freshness"]["state"] if found else None
    return {"kind": kind, "fate": fate, "stale": stale, "state": state, "marked": state in STALE,
            "detail": found["freshness"]["detail"] if found else ""}  # fmt: skip


def score_steps(project: Project, closed: list[dict[str, Any]], still_open: list[dict[str, Any]]) -> list[dict[str, Any]]:
    closed_texts = {s["text"]: s for s in closed}
    open_texts = {s["text"] for s in still_open}
    rows = []
    for step in project.steps:
        found = closed_texts.get(step.text)
        rows.append({"text": step.text, "done": step.done, "why": step.why,
                     "closed": bool(found and found.get("closed_by_commit")), "listed": step.text in open_texts or bool(found)})  # fmt: skip
    return rows


# --- the time the checks add to SessionStart --------------------------------------------------------


def load_project(run, work: Path, memories: int) -> Project:
    """A project with `memories` observations (reads of 200 files over sessions of 50 tool uses),
    then commits that change a tenth of the files and delete a few."""
    repo = GitRepo(work / "big-shop")
    project = Project("big-shop", repo)
    names = [f"pkg/m{i // 20}/f{i}.py" for i in range(200)]
    repo.commit("Start", files={n: source(f"f{i}", i) for i, n in enumerate(names)})
    count, sid = 0, None
    while count < memories:
        if count % 50 == 0:
            if sid:
                _poster(run, project, sid)("Stop", stop_hook_active=False, last_assistant_message=f"Fixed {names[count % 200]}.")
            sid = f"big-{count}-{uuid.uuid4().hex[:6]}"
            post = _poster(run, project, sid)
            post("SessionStart", source="startup")
        path = names[count % 200]
        full = f"{project.root}/{path}"
        run.client.post("/api/v1/events", {"hook_event_name": "PostToolUse", "session_id": sid, "cwd": project.root,
                                           "transcript_path": str(run.work / f"{sid}.jsonl"), "tool_name": "Read",
                                           "tool_use_id": f"toolu_{sid}_{count}", "tool_input": {"file_path": full},
                                           "tool_response": {"type": "text", "file": {"filePath": full,
                                                             "content": (repo.root / path).read_text()}}})  # fmt: skip
        count += 1
    _poster(run, project, sid)("Stop", stop_hook_active=False, last_assistant_message="Fixed the totals.")
    drained(run, timeout=1800)  # the briefing reads records, not vectors: their embedding may go on
    for i, name in enumerate(names[::10]):
        repo.commit(f"Change {name}", files={name: None if i % 4 == 0 else source("changed", i)})
    return project


def time_briefings(data_dir: Path, project: str, runs: int) -> dict[str, Any]:
    """Build the project's briefing in process, on the stopped worker's data dir, with the checks and
    without, alternately (a busy machine slows both alike); the first build of each is kept apart:
    with the checks it is the one that runs git and hashes the files after HEAD moved."""
    from memory_anchor.schemas.settings import load_settings
    from memory_anchor.worker.context import ContextRequest, build_context
    from memory_anchor.worker.services import Services

    settings = load_settings(data_dir)
    both = {label: Services(data_dir, settings.model_copy(update={"code_checks": checks}), token="bench")
            for label, checks in (("without", False), ("with", True))}  # fmt: skip
    times: dict[str, list[float]] = {"without": [], "with": []}
    marked = 0
    for _ in range(runs + 1):
        for label, services in both.items():
            started = time.perf_counter()
            built = build_context(ContextRequest(project=project, services=services.context_services), services.db.reader())
            times[label].append((time.perf_counter() - started) * 1000)
            if label == "with":
                marked = sum(1 for line in built.text.splitlines() if " since" in line or " moved to " in line)
    out: dict[str, Any] = {"runs": runs, "marked_lines": marked}
    for label, found in times.items():
        rest = sorted(found[1:])
        out[label] = {"first": found[0], "median": statistics.median(rest), "p95": rest[int(0.95 * (len(rest) - 1))]}
    out["added_ms"] = out["with"]["median"] - out["without"]["median"]
    out["added_first_ms"] = out["with"]["first"] - out["without"]["first"]
    return out


# --- the run ---------------------------------------------------------------------------------------


def measure(work: Path, *, projects: int, memories: int, briefing_runs: int) -> dict[str, Any]:
    from memory_anchor.bench.context import Run

    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["MEMORY_ANCHOR_DATA_DIR"] = str(work / "data")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    memory_rows: list[dict[str, Any]] = []
    step_rows: list[dict[str, Any]] = []
    with Run(work, env) as run:
        built = [build_project(work, p) for p in range(projects)]
        for project, _ in built:
            play_sessions(run, project)
        for project, plan in built:
            apply_fates(project, plan)
        for project, _ in built:
            report = run.client.post("/api/v1/verify", {"project": project.root, "include_fresh": True})
            memory_rows += score_memories(project, report)
            run.client.get("/api/v1/context", project=project.root, source="startup")  # shows them closed, writes nothing
            run.client.post("/api/v1/event-log/archive/run", {})  # the maintenance job records it (as the git watch does)
            closed = run.client.get("/api/v1/next-steps", project=project.root, status="closed")["results"]
            still_open = run.client.get("/api/v1/next-steps", project=project.root)["results"]
            step_rows += score_steps(project, closed, still_open)
        started = time.monotonic()
        big = load_project(run, work, memories) if memories else None
        loaded = time.monotonic() - started
    figures = summarize(memory_rows, step_rows)
    if big is not None:
        figures["briefing"] = {"memories": memories, "load_seconds": loaded, **time_briefings(work / "data", big.root, briefing_runs)}
    return figures


def summarize(memory_rows: list[dict[str, Any]], step_rows: list[dict[str, Any]]) -> dict[str, Any]:
    stale = [r for r in memory_rows if r["stale"]]
    fresh = [r for r in memory_rows if not r["stale"]]
    done = [r for r in step_rows if r["done"]]
    not_done = [r for r in step_rows if not r["done"]]
    by_fate: dict[str, dict[str, int]] = {}
    for r in memory_rows:
        entry = by_fate.setdefault(f"{r['kind']}/{r['fate']}", {"memories": 0, "marked": 0, "stale": r["stale"]})
        entry["memories"] += 1
        entry["marked"] += r["marked"]
    return {
        "stale": len(stale), "stale_marked": sum(r["marked"] for r in stale),
        "stale_missed": [r for r in stale if not r["marked"]],
        "fresh": len(fresh), "fresh_wrong": [r for r in fresh if r["marked"]],
        "unchecked": sum(1 for r in memory_rows if r["state"] is None),
        "by_fate": by_fate,
        "steps_done": len(done), "steps_closed": sum(r["closed"] for r in done),
        "steps_missed": [r for r in done if not r["closed"]],
        "steps_not_done": len(not_done), "steps_wrongly_closed": [r for r in not_done if r["closed"]],
        "steps_unlisted": [r for r in step_rows if not r["listed"]],
    }  # fmt: skip


def print_figures(figures: dict[str, Any]) -> None:
    stale, fresh = max(1, figures["stale"]), max(1, figures["fresh"])
    done = max(1, figures["steps_done"])
    print(f"stale memories marked: {figures['stale_marked']}/{figures['stale']} ({figures['stale_marked'] / stale:.1%}); "
          f"missed {len(figures['stale_missed'])}")  # fmt: skip
    print(f"fresh memories wrongly marked: {len(figures['fresh_wrong'])}/{figures['fresh']} "
          f"({len(figures['fresh_wrong']) / fresh:.1%}); memories not checked at all: {figures['unchecked']}")  # fmt: skip
    print(f"next steps done by commits closed: {figures['steps_closed']}/{figures['steps_done']} "
          f"({figures['steps_closed'] / done:.1%}); missed {len(figures['steps_missed'])}; "
          f"wrongly closed {len(figures['steps_wrongly_closed'])}/{figures['steps_not_done']}")  # fmt: skip
    print("by kind/fate (marked/memories):")
    for name, entry in sorted(figures["by_fate"].items()):
        print(f"  {name:32} {'stale' if entry['stale'] else 'fresh'}  {entry['marked']}/{entry['memories']}")
    for r in figures["stale_missed"][:10] + figures["fresh_wrong"][:10]:
        print(f"  ! {r['kind']}/{r['fate']}: state {r['state']} {r['detail']}")
    for r in figures["steps_missed"] + figures["steps_wrongly_closed"] + figures["steps_unlisted"]:
        print(f"  ! step ({r['why']}): {r['text']} closed={r['closed']} listed={r['listed']}")
    briefing = figures.get("briefing")
    if briefing:
        w, wo = briefing["with"], briefing["without"]
        print(f"SessionStart briefing at {briefing['memories']} memories ({briefing['runs']} builds each, in process): "
              f"median {wo['median']:.1f} ms without checks, {w['median']:.1f} ms with "
              f"(+{briefing['added_ms']:.1f} ms; p95 {wo['p95']:.1f} / {w['p95']:.1f}); first build after HEAD moved "
              f"{wo['first']:.1f} / {w['first']:.1f} ms (+{briefing['added_first_ms']:.1f}); "
              f"lines marked {briefing['marked_lines']}; the {briefing['memories']} memories took {briefing['load_seconds']:.0f} s to "
              f"post and process")  # fmt: skip


def meets_goals(figures: dict[str, Any], *, timing: bool = True) -> list[str]:
    """The goals the figures miss (empty: every one met); `timing` False leaves the time out (a test
    on a shared machine asserts no durations: the bench prints them)."""
    missed = []
    if figures["stale_marked"] < GOALS["stale_marked"] * figures["stale"]:
        missed.append("stale marked")
    if len(figures["fresh_wrong"]) > GOALS["fresh_wrong"] * figures["fresh"]:
        missed.append("fresh wrongly marked")
    if figures["steps_closed"] < GOALS["steps_closed"] * figures["steps_done"]:
        missed.append("steps closed")
    if len(figures["steps_wrongly_closed"]) > GOALS["steps_wrong"]:
        missed.append("steps wrongly closed")
    if timing and figures.get("briefing") and figures["briefing"]["added_ms"] > GOALS["added_ms"]:
        missed.append("time added to SessionStart")
    return missed


def run(args) -> int:
    quick = getattr(args, "quick", False)
    projects = args.projects or (2 if quick else 6)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ma-bench-staleness-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        figures = measure(work, projects=projects, memories=args.memories, briefing_runs=10 if quick else 30)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"bench staleness: {projects} scripted histories" + (" (quick)" if quick else ""))
    print_figures(figures)
    missed = meets_goals(figures)
    print("targets met" if not missed else f"targets missed: {', '.join(missed)}")
    return 0 if not missed else 1
