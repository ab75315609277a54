"""`memory-anchor bench context`: does the next session's briefing carry what was learned?

For each path (local: no Claude; claude: the `anthropic` SDK against a fake
Messages API on 127.0.0.1 that answers as a model would, from the scenarios'
`claude` replies), a real worker on a throw-away data dir receives the scripted
sessions of `context_scenarios.py` through its hook-event API (POST
/api/v1/events, as the hooks post them). Then the real SessionStart hook prints
the next session's context, and the real UserPromptSubmit hook asks the probe
prompts. Printed per path:

- planted: the fraction of planted rules, decisions, root causes and next steps
  found on one line of the context (all of an item's words on the same line);
- stale: lines that still brief a rule the user replaced;
- repeated: context lines that say what an earlier line said;
- tokens and characters of the context (budget 3,000 tokens, cap 10,000 chars);
- recall: the fraction of probe prompts whose recall carries the planted answer,
  and the recall lines that repeat another;
- rule lines not planted: rules or decisions briefed that no scenario planted
  (false positives of the extraction among the routine prompts).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RULE_LINES = ("- rule:", "- decision:", "- preference:")
GOALS = {"planted": 0.9, "repeated": 0, "tokens": 3000, "chars": 10_000}


# --- the model behind the fake Messages API ------------------------------------------


def _system_text(request: dict[str, Any]) -> str:
    system = request.get("system")
    if isinstance(system, list):
        return " ".join(b.get("text", "") for b in system if isinstance(b, dict))
    return str(system or "")


def _user_text(request: dict[str, Any]) -> str:
    parts = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [b.get("text", "") for b in content if isinstance(b, dict)]
    return "\n".join(parts)


class ScriptedClaude:
    """Answers the worker's prompts the way a model would for these scenarios."""

    def __init__(self, scenarios: list[dict[str, Any]]):
        self.sessions = [s for scenario in scenarios for s in scenario["sessions"]]

    def _session(self, text: str) -> dict[str, Any] | None:
        return next((s for s in self.sessions if s["prompts"][0][:30] in text), None)

    def __call__(self, request: dict[str, Any]) -> Any:
        from tests.fakes.anthropic_server import json_reply

        system, text = _system_text(request), _user_text(request)
        if "into an observation" in system:
            return json_reply({"observations": self._observations(text)})
        session = self._session(text)
        claude = (session or {}).get("claude") or {}
        if "session summary" in system:
            return json_reply(claude.get("summary") or {"request": "", "completed": "Routine maintenance."})
        if "extract durable knowledge" in system:
            return json_reply({"facts": [{k: v for k, v in f.items() if k != "replaces"} for f in claude.get("facts", [])]})
        if "manage the fact memory" in system:
            return json_reply({"decisions": self._decisions(text)})
        return None

    @staticmethod
    def _observations(text: str) -> list[dict[str, Any]]:
        out = []
        for index, body in re.findall(r'<tool_use index="(\d+)"[^>]*>\n(.*?)\n</tool_use>', text, re.S):
            try:
                use = json.loads(body)
            except ValueError:
                continue
            tool, given, got = use.get("tool_name"), use.get("tool_input") or {}, use.get("tool_response") or {}
            if tool == "Bash":
                lines = [line for line in f"{got.get('stdout', '')}\n{got.get('stderr', '')}".splitlines() if line.strip()]
                telling = next((line for line in lines if re.search(r"(?i)error|failed|assert", line)), lines[-1] if lines else "")
                item = {"type": "discovery" if "failed" in telling.lower() else "event",
                        "title": f"Ran `{given.get('command')}`", "summary": f"Result: {telling.strip()}"}  # fmt: skip
            elif tool == "Grep":
                files = got.get("filenames") or []
                item = {"type": "discovery", "title": f"Searched the code for {given.get('pattern')}",
                        "summary": f"{given.get('pattern')} appears in {', '.join(files) or 'no file'}"}  # fmt: skip
            elif tool in ("Edit", "Write"):
                item = {"type": "change", "title": f"Changed {given.get('file_path')}",
                        "summary": f"Updated {given.get('file_path')}"}  # fmt: skip
            else:
                item = {"type": "discovery", "title": f"Read {given.get('file_path')}", "summary": f"Looked at {given.get('file_path')}"}
            out.append({"index": int(index), **item, "concepts": [], "facts": []})
        return out

    def _decisions(self, text: str) -> list[dict[str, Any]]:
        existing = dict(re.findall(r"^(\d+)\. (.*)$", text.split("Candidates:")[0], re.M))
        canned = {f["text"]: f for s in self.sessions for f in (s.get("claude") or {}).get("facts", [])}
        out = []
        for number, candidate in re.findall(r"^(\d+)\. (.*) \(similar existing: [^)]*\)$", text.split("Candidates:")[-1], re.M):
            fact = canned.get(candidate) or {}
            replaced = fact.get("replaces")
            target = next((int(n) for n, t in existing.items() if replaced and replaced.lower() in t.lower()), None)
            if target is not None:
                out.append({"candidate": int(number), "event": "UPDATE", "target": target, "text": candidate,
                            "reason": f"the user replaced {replaced}"})  # fmt: skip
            elif candidate in existing.values():
                out.append({"candidate": int(number), "event": "NONE", "target": None, "text": None, "reason": "known"})
            else:
                out.append({"candidate": int(number), "event": "ADD", "target": None, "text": None, "reason": "new"})
        return out


# --- driving a worker ----------------------------------------------------------------------


class Run:
    """One worker on a fresh data dir, fed the scenarios through its hook-event API."""

    def __init__(self, work: Path, env: dict[str, str]):
        self.work = work
        self.data_dir = work / "data"
        self.env = env

    def __enter__(self) -> "Run":
        from memory_anchor.client.worker_client import WorkerClient
        from memory_anchor.core import lifecycle

        shutil.rmtree(self.data_dir, ignore_errors=True)
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            lifecycle.start_background(self.data_dir, wait=120)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.client = WorkerClient(self.data_dir, timeout=120, autostart=False)
        return self

    def __exit__(self, *exc) -> None:
        from memory_anchor.core import lifecycle

        lifecycle.stop(self.data_dir)

    def cwd(self, project: str) -> str:
        path = self.work / "projects" / project
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    def post(self, event: str, session: str, project: str, **fields: Any) -> None:
        payload = {"hook_event_name": event, "session_id": session, "cwd": self.cwd(project),
                   "transcript_path": str(self.work / f"{session}.jsonl"), **fields}  # fmt: skip
        self.client.post("/api/v1/events", payload)

    def play(self, scenario: dict[str, Any]) -> None:
        for number, session in enumerate(scenario["sessions"]):
            sid = f"{scenario['project']}-{number}-{uuid.uuid4().hex[:6]}"
            self.post("SessionStart", sid, scenario["project"], source="startup")
            prompts = list(session["prompts"])
            tools = list(session["tools"])
            per_prompt = max(1, len(tools) // len(prompts))
            for i, prompt in enumerate(prompts):
                self.post("UserPromptSubmit", sid, scenario["project"], prompt=prompt)
                chunk = tools[i * per_prompt : (i + 1) * per_prompt] if i < len(prompts) - 1 else tools[i * per_prompt :]
                for n, use in enumerate(chunk):
                    self.post("PostToolUse", sid, scenario["project"], tool_use_id=f"toolu_{sid}_{i}_{n}", **use)
            self.post("Stop", sid, scenario["project"], stop_hook_active=False, last_assistant_message=session["last"])
            self.post("SessionEnd", sid, scenario["project"], reason="other")

    def settle(self, timeout: float = 600.0) -> None:
        """Wait until every event is processed (and its extraction done) and indexed."""
        marker = f"settle-{uuid.uuid4().hex[:6]}"
        self.post("SessionStart", marker, "settle", source="startup")  # processed after every earlier event's hooks
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.client.get("/api/v1/status")
            busy = {k: v for k, v in (status.get("inbox") or {}).items() if k not in ("done", "failed") and v}
            if not busy and not status.get("pending_vectors"):
                return
            time.sleep(0.2)
        raise TimeoutError("the worker did not process the scripted sessions in time")

    def hook(self, name: str, payload: dict[str, Any]) -> str:
        env = {**self.env, "MEMORY_ANCHOR_DATA_DIR": str(self.data_dir)}
        out = subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "hook.py"), name], input=json.dumps(payload),
                             capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
        try:
            return json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        except (ValueError, KeyError, TypeError):
            return out.stdout

    def next_context(self, project: str, via: str = "hooks") -> str:
        return self.context_at(self.cwd(project), via)

    def context_at(self, cwd: str, via: str = "hooks") -> str:
        """The next session's briefing in `cwd`."""
        sid = f"next-{uuid.uuid4().hex[:6]}"
        if via == "api":  # what the hook prints, without its time limit (a loaded CI machine)
            return self.client.get("/api/v1/context", cwd=cwd, source="startup")["context"]
        return self.hook("SessionStart", {"hook_event_name": "SessionStart", "session_id": sid, "cwd": cwd,
                                           "source": "startup", "transcript_path": str(self.work / f"{sid}.jsonl")})  # fmt: skip

    def recall(self, project: str, prompt: str, via: str = "hooks") -> str:
        return self.recall_at(self.cwd(project), prompt, via)

    def recall_at(self, cwd: str, prompt: str, via: str = "hooks") -> str:
        """What recall adds to `prompt` typed in `cwd`."""
        sid = f"probe-{uuid.uuid4().hex[:6]}"
        if via == "api":
            return self.client.post("/api/v1/recall", {"prompt": prompt, "cwd": cwd, "session_id": sid})["context"]
        return self.hook("UserPromptSubmit", {"hook_event_name": "UserPromptSubmit", "session_id": sid, "prompt": prompt,
                                                "cwd": cwd, "transcript_path": str(self.work / f"{sid}.jsonl")})  # fmt: skip


# --- measuring ------------------------------------------------------------------------------------


def on_one_line(text: str, words: list[str]) -> bool:
    return any(all(w.lower() in line.lower() for w in words) for line in text.splitlines())


def repeated_lines(text: str) -> int:
    from memory_anchor.worker.memory.text import line_key

    seen, repeats = set(), 0
    for line in text.splitlines():
        if not line.startswith("- "):
            continue
        key = line_key(line)
        repeats += key in seen
        seen.add(key)
    return repeats


def measure(path: str, work: Path, scenarios: list[dict[str, Any]] | None = None, *, via: str = "hooks") -> dict[str, Any]:
    """Play the scenarios on one path and return its figures (and the contexts, for reading).

    `via="hooks"` reads the context and the recalls through the real hook commands;
    `via="api"` through the same endpoints the hooks call, without the hooks' time
    limits (1.5 s for recall), so a busy machine cannot turn a slow answer into a miss.
    """
    from memory_anchor.bench.context_scenarios import SCENARIOS
    from memory_anchor.worker.context.model import estimate_tokens

    scenarios = scenarios or SCENARIOS
    # Nothing of the caller's Claude or Memory Anchor settings: the path measured is the one asked
    # for (an inherited MEMORY_ANCHOR_LLM_ROUTE=local made the Claude path's worker distil locally).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MEMORY_ANCHOR_"))}
    env["MEMORY_ANCHOR_DATA_DIR"] = str(work / "data")
    env["MEMORY_ANCHOR_LLM_ROUTE"] = "api" if path == "claude" else "local"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    fake = None
    if path == "claude":
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        from tests.fakes.anthropic_server import FakeAnthropicServer

        fake = FakeAnthropicServer(responder=ScriptedClaude(scenarios), default={"json": {}}).start()
        env.update(ANTHROPIC_API_KEY="sk-ant-bench-fake", ANTHROPIC_BASE_URL=fake.base_url)
    figures: dict[str, Any] = {"path": path, "via": via, "scenarios": []}
    try:
        with Run(work, env) as run:
            for scenario in scenarios:
                run.play(scenario)
            run.settle()
            for scenario in scenarios:
                context = run.next_context(scenario["project"], via)
                found = [p["what"] for p in scenario["planted"] if on_one_line(context, p["expect"])]
                rules = "\n".join(line for line in context.splitlines() if line.startswith(RULE_LINES))
                stale = [s for s in scenario.get("stale", []) if on_one_line(rules, s)]
                extra = [line for line in rules.splitlines()
                         if not any(on_one_line(line, p["expect"]) for p in scenario["planted"])]  # fmt: skip
                recalls = [(p, run.recall(scenario["project"], p["prompt"], via)) for p in scenario["probes"]]
                probes = [(p["prompt"], on_one_line(text, p["expect"])) for p, text in recalls]
                figures["scenarios"].append({
                    "name": scenario["name"], "planted": len(scenario["planted"]), "found": found,
                    "missed": [p["what"] for p in scenario["planted"] if p["what"] not in found],
                    "stale": len(stale), "extra_rules": extra, "recall_repeats": sum(repeated_lines(t) for _, t in recalls),
                    "repeated": repeated_lines(context), "tokens": estimate_tokens(context),
                    "chars": len(context), "probes": len(probes), "recalled": sum(ok for _, ok in probes),
                    "missed_probes": [q for q, ok in probes if not ok], "context": context,
                })  # fmt: skip
            figures["claude_requests"] = len(fake.requests) if fake else 0
    finally:
        if fake is not None:
            fake.stop()
    rows = figures["scenarios"]
    figures["planted"] = sum(len(r["found"]) for r in rows) / max(1, sum(r["planted"] for r in rows))
    figures["recall"] = sum(r["recalled"] for r in rows) / max(1, sum(r["probes"] for r in rows))
    figures["repeated"] = sum(r["repeated"] for r in rows)
    figures["stale"] = sum(r["stale"] for r in rows)
    figures["extra_rules"] = sum(len(r["extra_rules"]) for r in rows)
    figures["recall_repeats"] = sum(r["recall_repeats"] for r in rows)
    figures["tokens"] = max(r["tokens"] for r in rows)
    figures["chars"] = max(r["chars"] for r in rows)
    return figures


def meets_goals(figures: dict[str, Any]) -> bool:
    return (figures["planted"] >= GOALS["planted"] and figures["repeated"] <= GOALS["repeated"]
            and figures["tokens"] <= GOALS["tokens"] and figures["chars"] <= GOALS["chars"])  # fmt: skip


def report(figures: dict[str, Any], *, show_context: bool = False) -> None:
    print(f"\n== {figures['path']} path, read via {figures['via']}" + (f" ({figures['claude_requests']} Messages API requests)" if figures["path"] == "claude" else ""))
    print(f"{'scenario':44} {'planted':>8} {'stale':>5} {'repeat':>6} {'tokens':>6} {'chars':>6} {'recall':>6}")
    for r in figures["scenarios"]:
        print(f"{r['name'][:44]:44} {len(r['found']):>3}/{r['planted']:<4} {r['stale']:>5} {r['repeated']:>6} "
              f"{r['tokens']:>6} {r['chars']:>6} {r['recalled']:>3}/{r['probes']:<2}")  # fmt: skip
        for what in r["missed"]:
            print(f"    missed: {what}")
        for prompt in r["missed_probes"]:
            print(f"    recall missed: {prompt}")
        for line in r["extra_rules"]:
            print(f"    briefed as a rule but not planted: {line}")
        if show_context:
            print("    " + r["context"].replace("\n", "\n    "))
    print(f"planted fraction {figures['planted']:.2f} (goal >= {GOALS['planted']}), repeated lines {figures['repeated']} "
          f"(goal 0), stale rules {figures['stale']}, max tokens {figures['tokens']} (<= {GOALS['tokens']}), "
          f"max chars {figures['chars']} (<= {GOALS['chars']}), probe recall {figures['recall']:.2f}, "
          f"rule lines not planted {figures['extra_rules']}, repeated recall lines {figures['recall_repeats']}")  # fmt: skip


def run(args) -> int:
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ma-bench-context-"))
    paths = ["local", "claude"] if args.path == "both" else [args.path]
    print(f"Memory Anchor context benchmark: {len(paths)} path(s), data under {work}", flush=True)
    ok = True
    for path in paths:
        figures = measure(path, work / path, via=args.via)
        report(figures, show_context=args.show_context)
        ok = ok and meets_goals(figures)
    print("\ngoals met" if ok else "\ngoals NOT met")
    return 0 if ok else 1
