"""Deterministic local compression: observations and summaries without an LLM.

Used when no Anthropic key is set, when the daily token budget is spent, and as
the base that Claude's output is merged onto (command, outcome and files parsed
here are facts about the payload; Claude only rewords them).

Everything is extractive: titles come from the tool and its input, summaries
from the most telling lines of the output (errors first, then the last line,
which is where test runners and build tools print their verdict). Payloads come
straight from Claude Code hooks, so no shape is trusted: every accessor below
tolerates any JSON value, and `compress_tool_use` never raises.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from memory_anchor.schemas.observations import (
    OBSERVATION_TYPES,
    SUMMARY_MAX_CHARS,
    TITLE_MAX_CHARS,
    ObservationDraft,
    SessionSummaryDraft,
    shorten,
)
from memory_anchor.worker.pipeline.compress.shell_files import MAX_FILES, files_command_wrote, files_in_command, is_path, unique

log = logging.getLogger(__name__)

NARRATIVE_MAX_CHARS = 1500
MAX_FACTS = 8

# --- tolerant accessors -------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, (int, float)):
        return str(value)
    return ""


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,6}", value.strip()):
        return int(value)
    return None


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def text_of(value: Any, limit: int = 20_000) -> str:
    """The readable text inside any tool response shape (str, blocks, dicts)."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, (list, tuple)):  # MCP / Task: list of content blocks
        parts = []
        for block in value[:50]:
            if isinstance(block, dict):
                parts.append(_str(block.get("text")) or text_of(block.get("content"), limit))
            else:
                parts.append(_str(block))
        return "\n".join(p for p in parts if p)[:limit]
    if isinstance(value, dict):
        for key in ("stdout", "output", "result", "content", "text", "message", "error"):
            found = value.get(key)
            if found:
                text = text_of(found, limit)
                if key == "stdout" and value.get("stderr"):
                    text = f"{text}\n{text_of(value.get('stderr'), limit)}"
                if text:
                    return text[:limit]
        if isinstance(value.get("file"), dict):
            return text_of(value["file"].get("content"), limit)
        if value.get("stderr"):
            return text_of(value.get("stderr"), limit)
    return ""


def _compact_json(value: Any, limit: int = 300) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = ""
    return text[:limit]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# --- reading outputs ------------------------------------------------------------

_ERROR_LINE = re.compile(
    r"(?i)\b(error|exception|traceback|failed|failure|fatal|panic|cannot|could not|"
    r"not found|no such file|permission denied|denied|refused|timed? ?out|assert)"
)
_TEST_COMMAND = re.compile(
    r"(?i)(\bpy\.?test\b|\bpython[\d.]* -m (pytest|unittest)\b|\bnose2?\b|\btox\b|\bjest\b|\bvitest\b|"
    r"\bmocha\b|\bgo test\b|\bcargo (test|nextest)\b|\b(npm|yarn|pnpm|bun)( run)? test\b|\brspec\b|"
    r"\bphpunit\b|\bctest\b|\bmake (test|check)\b|\bmvn test\b|\bgradle\w* test\b|\bdotnet test\b)"
)
_FAILED_COUNT = re.compile(r"(?i)\b(\d+) (failed|failing|failures?|errors?)\b")
_PASSED_COUNT = re.compile(r"(?i)\b(\d+) (passed|passing|ok)\b")
_FAILED_TEST = re.compile(r"^(?:FAILED|FAIL|ERROR)[: ]+(\S+)")
_EXIT_CODE = re.compile(r"(?i)exit (?:code|status)[: ]+(-?\d+)")


def key_lines(text: str, limit: int = 2) -> list[str]:
    """The lines that say most about an output: error lines, else the last line."""
    lines = _lines(text)
    if not lines:
        return []
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    if errors:
        return unique((shorten(line, 160) for line in errors[-limit:]), limit)
    return [shorten(lines[-1], 160)]


def _head_tail(text: str, limit: int = NARRATIVE_MAX_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = (limit * 2) // 3
    return text[:head].rstrip() + "\n…\n" + text[-(limit - head) :].lstrip()


def _response_error(response: Any) -> bool:
    if isinstance(response, str):
        return bool(re.match(r"(?i)\s*(error|<tool_use_error>)", response))
    data = _dict(response)
    return bool(data.get("is_error") or data.get("isError") or (data.get("error") and not data.get("stdout")))


# --- concepts -----------------------------------------------------------------

_EXTENSION_CONCEPTS = {
    "py": "python", "pyi": "python", "ipynb": "python", "js": "javascript", "mjs": "javascript",
    "cjs": "javascript", "jsx": "javascript", "ts": "typescript", "tsx": "typescript",
    "rs": "rust", "go": "go", "java": "java", "kt": "kotlin", "rb": "ruby", "php": "php",
    "c": "c", "h": "c", "cc": "c++", "cpp": "c++", "hpp": "c++", "cs": "c#", "swift": "swift",
    "sql": "sql", "sh": "shell", "bash": "shell", "md": "docs", "rst": "docs",
    "json": "config", "yaml": "config", "yml": "config", "toml": "config", "ini": "config",
    "html": "web", "css": "web", "vue": "web", "svelte": "web",
}  # fmt: skip
_COMMAND_CONCEPTS = [
    (re.compile(r"\bgit\b"), "git"),
    (_TEST_COMMAND, "testing"),
    (re.compile(r"\b(pip|uv|poetry|npm|yarn|pnpm|cargo add|go get|apt(-get)?|brew) (install|add)\b"), "dependencies"),
    (re.compile(r"\b(make|cmake|tsc|webpack|vite build|cargo build|go build|gradle|mvn)\b"), "build"),
    (re.compile(r"\b(docker|podman|kubectl|helm)\b"), "containers"),
]


def _concepts(files: Iterable[str], command: str = "", extra: Iterable[str] = ()) -> list[str]:
    found = list(extra)
    for path in files:
        ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
        if ext in _EXTENSION_CONCEPTS:
            found.append(_EXTENSION_CONCEPTS[ext])
        if re.search(r"(^|/)(tests?|spec)(/|_)|_test\.|\.test\.|test_", path):
            found.append("testing")
    for pattern, concept in _COMMAND_CONCEPTS:
        if command and pattern.search(command):
            found.append(concept)
    return unique(found, 6)


# --- type inference for edits -------------------------------------------------

_FIX_WORDS = re.compile(r"(?i)\b(fix(es|ed)?|bug(fix)?|hotfix|typo|workaround|regression|off[- ]by[- ]one)\b")
_REFACTOR_WORDS = re.compile(r"(?i)\b(refactor(ed|ing)?|renamed?|extract(ed)?|clean ?up|simplif(y|ied)|reorgani[sz]e)\b")


def _edit_type(old: str, new: str, created: bool) -> str:
    if created:
        return "feature"
    added = "\n".join(
        line[1:] for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line.startswith("+ ")
    ) if len(old) + len(new) < 200_000 else new  # fmt: skip
    if _FIX_WORDS.search(added):
        return "bugfix"
    if _REFACTOR_WORDS.search(added) or (old and "".join(old.split()) == "".join(new.split())):
        return "refactor"
    return "change"


def _diff(old: str, new: str, path: str, limit: int = NARRATIVE_MAX_CHARS) -> str:
    if len(old) + len(new) > 200_000:
        return f"(large edit: {len(old)} chars replaced by {len(new)} chars)"
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), fromfile=path, tofile=path, lineterm="", n=1
    )
    return _head_tail("\n".join(lines), limit)


def _first_line(text: str, limit: int = 60) -> str:
    lines = _lines(text)
    return shorten(lines[0], limit) if lines else ""


# --- one builder per tool -------------------------------------------------------

Fields = dict[str, Any]


def _bash(tool_input: dict[str, Any], response: Any, cwd: str = "") -> Fields:
    command = _str(tool_input.get("command")).strip()
    description = _str(tool_input.get("description")).strip()
    data = _dict(response)
    stdout = _str(data.get("stdout")) if data else text_of(response)
    stderr = _str(data.get("stderr"))
    output = "\n".join(p for p in (stdout, stderr) if p)
    interrupted = bool(data.get("interrupted"))
    exit_code = None
    for key in ("exit_code", "exitCode", "returnCode", "return_code", "code", "status"):
        exit_code = _int(data.get(key))
        if exit_code is not None:
            break
    if exit_code is None:
        match = _EXIT_CODE.search(output[:2000] if not data else stderr[:2000] + _str(data.get("error"))[:2000])
        exit_code = int(match.group(1)) if match else None
    errored = _response_error(response) or (exit_code not in (None, 0))
    is_test = bool(_TEST_COMMAND.search(command))
    failed = _FAILED_COUNT.search(output)
    passed = _PASSED_COUNT.search(output)
    # A run cut short (`-x`, a crash) may print a failing test's line and no summary count.
    failing = unique((m.group(1) for m in map(_FAILED_TEST.match, _lines(output)) if m), 5) if is_test else []
    tests_failed = is_test and (errored or bool(failed and failed.group(1) != "0") or bool(failing))
    errored = errored or tests_failed
    outcome = "interrupted" if interrupted else "error" if errored else "ok"
    read, modified = files_in_command(command, cwd)
    modified = unique(modified + files_command_wrote(command, output, cwd), MAX_FILES)
    facts: list[str] = []
    # `cd /repo && pytest -q` reads better as `pytest -q`
    short_cmd = shorten(re.sub(r"^\s*cd\s+\S+\s*&&\s*", "", command), 80) or "a command"
    if is_test:
        verdict = []
        if failed and failed.group(1) != "0":
            verdict.append(f"{failed.group(1)} {failed.group(2)}")
        if passed:
            verdict.append(f"{passed.group(1)} {passed.group(2)}")
        label = ", ".join(verdict) or ("failed" if tests_failed else "passed" if outcome == "ok" else outcome)
        title = f"Ran tests `{short_cmd}`: {label}"
        facts.append(f"Tests `{short_cmd}` {('failed' if tests_failed else 'passed')}: {label}")
        facts += [f"Failing test: {name}" for name in failing]
        kind = "discovery" if tests_failed else "event"
    else:
        title = description or f"Ran `{short_cmd}`"
        if outcome != "ok":
            title += f" ({outcome}{f', exit {exit_code}' if exit_code not in (None, 0) else ''})"
        kind = _command_type(command, errored, bool(modified))
        if re.search(r"\bgit commit\b", command):
            message = re.search(r"-m\s+(?:\"([^\"]+)\"|'([^']+)'|(\S+))", command)
            if message:
                facts.append(f"Committed: {next(g for g in message.groups() if g)}")
    if exit_code not in (None, 0):
        facts.append(f"`{short_cmd}` exited with code {exit_code}")
    if interrupted:
        facts.append(f"`{short_cmd}` was interrupted")
    lines = key_lines(output)
    summary = f"`{short_cmd}`"
    summary += f" → {'; '.join(lines)}" if lines else (" produced no output" if outcome == "ok" else f" {outcome}")
    if description and not is_test:
        summary = f"{description}: {summary}"
    return {
        "type": kind,
        "title": title,
        "summary": summary,
        "narrative": f"$ {_head_tail(command, 400)}\n{_head_tail(output)}".strip(),
        "facts": facts,
        "files_read": read,
        "files_modified": modified,
        "command": command or None,
        "outcome": outcome,
        "exit_code": exit_code,
        "concepts": _concepts(read + modified, command),
    }


def _command_type(command: str, errored: bool, writes_files: bool) -> str:
    """A change when the command installs something, writes a file (`writes_files`: a redirection or
    a writing program, as shell_files reads the line) or moves one; a discovery when it only looks.
    Quoted text is an argument: `grep -rn "<<<<<<< HEAD\\|>>>>>>> main"` writes nothing, nor does `2>&1`."""
    if errored:
        return "discovery"
    bare = re.sub(r"'[^']*'|\"[^\"]*\"", "''", command)
    if re.search(r"\b(pip|uv|poetry|npm|yarn|pnpm|apt(-get)?|brew|cargo|go) (install|add|get|remove|uninstall)\b", bare):
        return "change"
    if writes_files or re.search(r"\b(sed -i|mv|cp|rm|mkdir|git (mv|rm|apply|checkout|switch|restore|commit|merge|"
                                 r"rebase|cherry-pick|revert|reset|pull|push|stash))\b", bare):  # fmt: skip
        return "change"
    if re.match(r"\s*(cd\s+\S+\s*&&\s*)?(ls|cat|head|tail|grep|rg|find|wc|which|file|stat|tree|du|df|ps|env|pwd|echo|"
                r"git (status|log|diff|show|branch|blame))\b", bare):  # fmt: skip
        return "discovery"
    return "event"


def _read(tool_input: dict[str, Any], response: Any) -> Fields:
    path = _str(tool_input.get("file_path") or tool_input.get("path") or tool_input.get("notebook_path"))
    file_info = _dict(_dict(response).get("file"))
    content = _str(file_info.get("content")) or text_of(response)
    offset, limit = _int(tool_input.get("offset")), _int(tool_input.get("limit"))
    num_lines = _int(file_info.get("numLines")) or (len(content.splitlines()) if content else 0)
    total = _int(file_info.get("totalLines"))
    span = ""
    if offset or limit:
        start = offset or 1
        span = f" (lines {start}–{start + max((limit or num_lines) - 1, 0)})"
    title = f"Read {path or 'a file'}{span}"
    size = f"{num_lines} lines" + (f" of {total}" if total and total != num_lines else "")
    first = _first_line(content, 120)
    summary = f"Read {path or 'a file'}: {size}" + (f"; starts `{first}`" if first else "")
    return {
        "type": "discovery",
        "title": title,
        "summary": summary,
        "narrative": _head_tail(content, 600),
        "files_read": [path] if path else [],
        "concepts": _concepts([path] if path else []),
    }


def _edit(tool_input: dict[str, Any], response: Any, tool_name: str) -> Fields:
    path = _str(tool_input.get("file_path") or _dict(response).get("filePath"))
    if tool_name == "MultiEdit":
        edits = [_dict(e) for e in _list(tool_input.get("edits"))]
    else:
        edits = [tool_input]
    old = "\n".join(_str(e.get("old_string")) for e in edits)
    new = "\n".join(_str(e.get("new_string")) for e in edits)
    kind = _edit_type(old, new, created=False)
    count = f" ({len(edits)} edits)" if len(edits) > 1 else ""
    title = f"Edited {path or 'a file'}{count}"
    removed, added = len(old.splitlines()), len(new.splitlines())
    before, after = _first_line(old), _first_line(new)
    if before or after:
        summary = f"In {path or 'a file'}: `{before or '∅'}` → `{after or '∅'}` (-{removed}/+{added} lines)"
    else:
        summary = f"Edited {path or 'a file'}{count}"
    return {
        "type": kind,
        "title": title,
        "summary": summary,
        "narrative": _diff(old, new, path or "file"),
        "files_modified": [path] if path else [],
        "concepts": _concepts([path] if path else []),
        "facts": [f"{path} changed: -{removed}/+{added} lines"] if path else [],
    }


def _write(tool_input: dict[str, Any], response: Any) -> Fields:
    data = _dict(response)
    path = _str(tool_input.get("file_path") or data.get("filePath"))
    content = _str(tool_input.get("content")) or _str(data.get("content"))
    created = _str(data.get("type")) != "update"
    lines = len(content.splitlines())
    kind = "feature" if created else _edit_type(_str(data.get("originalFile")), content, created=False)
    verb = "Created" if created else "Rewrote"
    first = _first_line(content, 100)
    return {
        "type": kind,
        "title": f"{verb} {path or 'a file'}",
        "summary": f"{verb} {path or 'a file'} ({lines} lines)" + (f"; starts `{first}`" if first else ""),
        "narrative": _head_tail(content, 800),
        "files_modified": [path] if path else [],
        "concepts": _concepts([path] if path else []),
    }


def _grep(tool_input: dict[str, Any], response: Any) -> Fields:
    pattern = _str(tool_input.get("pattern"))
    where = _str(tool_input.get("path")) or _str(tool_input.get("glob"))
    data = _dict(response)
    filenames = [_str(f) for f in _list(data.get("filenames")) if _str(f)]
    count = _int(data.get("numFiles"))
    count = count if count is not None else len(filenames)
    content = _str(data.get("content")) or (text_of(response) if not data else "")
    title = f"Searched for '{shorten(pattern, 60)}'" + (f" in {where}" if where else "")
    if filenames:
        summary = f"{count} files match '{shorten(pattern, 40)}': {', '.join(filenames[:5])}"
    elif content:
        summary = f"Matches for '{shorten(pattern, 40)}': {_first_line(content, 120)}"
    else:
        summary = f"No matches for '{shorten(pattern, 60)}'" if count == 0 else title
    return {
        "type": "discovery",
        "title": title,
        "summary": summary,
        "narrative": _head_tail(content or "\n".join(filenames), 800),
        "facts": [f"'{shorten(pattern, 60)}' matched {count} files"] if filenames else [],
        "files_read": [where] if is_path(where) and "*" not in where else [],
        "concepts": _concepts(filenames[:10]),
    }


def _glob(tool_input: dict[str, Any], response: Any) -> Fields:
    pattern = _str(tool_input.get("pattern"))
    where = _str(tool_input.get("path"))
    data = _dict(response)
    filenames = [_str(f) for f in _list(data.get("filenames")) if _str(f)]
    count = _int(data.get("numFiles"))
    count = count if count is not None else len(filenames)
    title = f"Listed files matching '{shorten(pattern, 60)}'" + (f" in {where}" if where else "")
    summary = f"{count} files match '{shorten(pattern, 60)}'" + (f": {', '.join(filenames[:5])}" if filenames else "")
    return {
        "type": "discovery",
        "title": title,
        "summary": summary,
        "narrative": "\n".join(filenames[:50]),
        "concepts": _concepts(filenames[:10]),
    }


def _web_fetch(tool_input: dict[str, Any], response: Any) -> Fields:
    url = _str(tool_input.get("url")) or _str(_dict(response).get("url"))
    question = _str(tool_input.get("prompt"))
    data = _dict(response)
    result = _str(data.get("result")) or text_of(response)
    code = _int(data.get("code"))
    try:
        parts = urlsplit(url)
        place = (parts.netloc + parts.path) or url
    except ValueError:
        place = url
    title = f"Fetched {shorten(place, 90) or 'a web page'}"
    gist = _first_line(result, 150)
    summary = gist or (f"HTTP {code}" if code else title)
    return {
        "type": "discovery",
        "title": title,
        "summary": summary,
        "narrative": (f"Asked: {question}\n" if question else "") + _head_tail(result, 1200),
        "facts": [f"{url} answered HTTP {code}"] if code and code >= 400 else [],
        "outcome": "error" if code and code >= 400 else "ok",
        "concepts": ["web"],
    }


def _web_search(tool_input: dict[str, Any], response: Any) -> Fields:
    query = _str(tool_input.get("query"))
    text = text_of(response) or _compact_json(response, 1200)
    return {
        "type": "discovery",
        "title": f"Web search: {shorten(query, 80) or '(no query)'}",
        "summary": _first_line(text, 180) or f"Searched the web for {shorten(query, 150)}",
        "narrative": _head_tail(text, 1200),
        "concepts": ["web"],
    }


def _task(tool_input: dict[str, Any], response: Any) -> Fields:
    description = _str(tool_input.get("description")) or shorten(_str(tool_input.get("prompt")), 80)
    agent = _str(tool_input.get("subagent_type"))
    result = text_of(response)
    title = f"Subagent{f' ({agent})' if agent else ''}: {description or 'task'}"
    return {
        "type": "discovery",
        "title": title,
        "summary": _first_line(result, 190) or title,
        "narrative": _head_tail(result),
        "concepts": ["subagent"],
    }


def _todo(tool_input: dict[str, Any], response: Any) -> Fields:
    todos = [_dict(t) for t in _list(tool_input.get("todos") or _dict(response).get("newTodos"))]
    by_status: dict[str, list[str]] = {}
    for todo in todos:
        by_status.setdefault(_str(todo.get("status")) or "pending", []).append(_str(todo.get("content")))
    done = len(by_status.get("completed", []))
    active = by_status.get("in_progress", [])
    title = f"Updated todo list ({len(todos)} items, {done} done)"
    if active:
        summary = f"Working on: {active[0]}"
    elif by_status.get("pending"):
        summary = f"Next: {by_status['pending'][0]}"
    else:
        summary = title
    facts = [f"[{status}] {text}" for status, items in by_status.items() for text in items if text]
    return {"type": "note", "title": title, "summary": summary, "facts": facts, "concepts": ["planning"]}


def _notebook(tool_input: dict[str, Any], response: Any) -> Fields:
    path = _str(tool_input.get("notebook_path"))
    mode = _str(tool_input.get("edit_mode")) or "replace"
    source = _str(tool_input.get("new_source"))
    return {
        "type": "change",
        "title": f"Edited notebook {path or ''} ({mode} cell)".replace("  ", " "),
        "summary": f"{mode.capitalize()} a cell in {path or 'a notebook'}: `{_first_line(source, 100)}`",
        "narrative": _head_tail(source, 800),
        "files_modified": [path] if path else [],
        "concepts": ["python", "notebook"],
    }


_READ_ONLY_TOOL = re.compile(r"(?i)(search|get|list|read|fetch|find|query|show|view|describe|lookup|status)")


def _mcp(tool_name: str, tool_input: dict[str, Any], response: Any) -> Fields:
    parts = tool_name.split("__")
    server = parts[1] if len(parts) > 1 else "mcp"
    tool = parts[-1] if len(parts) > 2 else tool_name
    server = re.sub(r"^plugin_", "", server)
    text = text_of(response) or _compact_json(response, 1200)
    args = _compact_json(tool_input, 120) if tool_input else ""
    return {
        "type": "discovery" if _READ_ONLY_TOOL.search(tool) else "event",
        "title": f"{server}: {tool}" + (f" {args}" if args and len(args) < 60 else ""),
        "summary": _first_line(text, 190) or f"Called {tool} on {server}",
        "narrative": (f"Input: {args}\n" if args else "") + _head_tail(text, 1200),
        "concepts": ["mcp", server][:2],
    }


def _generic(tool_name: str, tool_input: dict[str, Any], response: Any) -> Fields:
    text = text_of(response) or _compact_json(response, 800)
    args = _compact_json(tool_input, 200) if tool_input else ""
    return {
        "type": "event",
        "title": f"Used {tool_name}",
        "summary": _first_line(text, 190) or (f"{tool_name} {args}" if args else f"Used {tool_name}"),
        "narrative": (f"Input: {args}\n" if args else "") + _head_tail(text, 1000),
    }


# --- entry points -------------------------------------------------------------------


def build_observation(payload: Any) -> ObservationDraft:
    """The observation for one PostToolUse payload (may raise on a bug; see below)."""
    data = _dict(payload)
    tool_name = _str(data.get("tool_name")).strip() or "unknown tool"
    tool_input = _dict(data.get("tool_input"))
    response = data.get("tool_response")
    if tool_name == "Bash":
        fields = _bash(tool_input, response, _str(data.get("cwd")))
    elif tool_name == "Read":
        fields = _read(tool_input, response)
    elif tool_name in ("Edit", "MultiEdit"):
        fields = _edit(tool_input, response, tool_name)
    elif tool_name == "Write":
        fields = _write(tool_input, response)
    elif tool_name == "Grep":
        fields = _grep(tool_input, response)
    elif tool_name in ("Glob", "LS"):
        fields = _glob(tool_input, response)
    elif tool_name == "WebFetch":
        fields = _web_fetch(tool_input, response)
    elif tool_name == "WebSearch":
        fields = _web_search(tool_input, response)
    elif tool_name in ("Task", "Agent"):
        fields = _task(tool_input, response)
    elif tool_name == "TodoWrite":
        fields = _todo(tool_input, response)
    elif tool_name == "NotebookEdit":
        fields = _notebook(tool_input, response)
    elif tool_name.startswith("mcp__"):
        fields = _mcp(tool_name, tool_input, response)
    else:
        fields = _generic(tool_name, tool_input, response)
    if fields.get("files_modified") and tool_name in FILE_CHANGERS and _response_error(response):
        fields = _change_not_made(fields, response)
    if "outcome" not in fields:
        fields["outcome"] = "error" if _response_error(response) else "ok"
    if fields["outcome"] == "error" and fields["type"] in ("event", "note"):
        fields["type"] = "discovery"
    tool_use_id = _str(data.get("tool_use_id")) or None
    return _draft(fields, tool_name=tool_name, tool_use_id=tool_use_id)


FILE_CHANGERS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
_REFUSED = re.compile(r"(?i)doesn'?t want to proceed|tool use was rejected|permission (?:was )?denied")


def _change_not_made(fields: Fields, response: Any) -> Fields:
    """An edit the user refused, or one that failed ("String to replace not found"), changed nothing:
    memory must not say the file was created or changed, nor list it among the session's changes."""
    path = fields["files_modified"][0]
    said = text_of(response)
    why = "the user refused the change" if _REFUSED.search(said) else _first_line(re.sub(r"</?tool_use_error>", "", said), 120)
    return {**fields, "type": "discovery", "outcome": "error", "title": f"Did not change {path}",
            "summary": f"Did not change {path}: {why}", "files_modified": [], "facts": []}  # fmt: skip


def _draft(fields: Fields, **extra: Any) -> ObservationDraft:
    fields = {**fields, **extra}
    fields["title"] = shorten(fields.get("title") or "Tool use", TITLE_MAX_CHARS) or "Tool use"
    fields["summary"] = shorten(fields.get("summary") or fields["title"], SUMMARY_MAX_CHARS) or fields["title"]
    fields["facts"] = [shorten(f, 300) for f in fields.get("facts", []) if f][:MAX_FACTS]
    if fields.get("type") not in OBSERVATION_TYPES:
        fields["type"] = "event"
    return ObservationDraft(**fields, distilled_by="local")


def compress_tool_use(payload: Any) -> ObservationDraft:
    """The observation for one PostToolUse payload; never raises.

    A payload no builder understands still becomes an observation (the event
    happened and must not be lost); the bug is logged for us to fix.
    """
    try:
        return build_observation(payload)
    except Exception:  # noqa: BLE001 - capture must survive any payload
        log.exception("local compression failed; storing a minimal observation")
        data = _dict(payload)
        tool_name = _str(data.get("tool_name")) or "unknown tool"
        return _draft(
            {"type": "event", "title": f"Used {tool_name}", "summary": _compact_json(data.get("tool_input"), 190)},
            tool_name=tool_name,
            tool_use_id=_str(data.get("tool_use_id")) or None,
        )


# --- session summaries ------------------------------------------------------------


def as_observation(value: Any) -> ObservationDraft | None:
    """An ObservationDraft from a draft, its dict, or a stored record (fields in `data`)."""
    if isinstance(value, ObservationDraft):
        return value
    if not isinstance(value, Mapping):
        return None
    merged: dict[str, Any] = {}
    data = value.get("data")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = None
    if isinstance(data, Mapping):
        merged.update(data)
    merged.update({k: v for k, v in value.items() if k in ObservationDraft.model_fields and v not in (None, "")})
    title = _str(merged.get("title")) or _first_line(_str(value.get("text")) or _str(value.get("memory")), 100)
    if not title:
        return None
    merged["title"] = shorten(title, TITLE_MAX_CHARS)
    merged["summary"] = shorten(_str(merged.get("summary")) or title, SUMMARY_MAX_CHARS)
    if merged.get("type") not in OBSERVATION_TYPES:
        merged["type"] = "event"
    for key in ("facts", "files_read", "files_modified", "concepts"):
        merged[key] = [_str(x) for x in _list(merged.get(key)) if _str(x)]
    try:
        return ObservationDraft.model_validate(merged)
    except ValueError:
        return None


_CHANGE_TYPES = ("bugfix", "feature", "refactor", "change", "decision")
_TEST_TITLE = re.compile(r"^Ran tests (`[^`]+`): (.+)$")
# Claude Code writes a plan-mode plan to ~/.claude/plans/<name>.md: its own notes, no change to the project.
# It stays among the files the session touched.
_PLAN_FILE = re.compile(r"[/\\]\.claude[/\\]plans[/\\][^/\\]+\.md$")


def summarize_session(
    prompts: Iterable[Any], observations: Iterable[Any], last_assistant_message: Any = None
) -> SessionSummaryDraft:
    """An extractive session summary; never raises on odd input.

    What was asked is each prompt's subject in the user's words (wrappers
    stripped, a pasted issue by its title: `memory_anchor.worker.memory.user_words`). What was
    done and what came of it are facts of the tool uses (the files the session
    changed, its test runs' last verdicts) and, from Claude's last message, what
    it says it did, the root causes it found and the work it left
    (`memory_anchor.worker.memory.outcomes`, which keeps the agent's narration and passing
    plans out). Todo items are the agent's working plan, not work left: never
    next steps.
    """
    from memory_anchor.worker.memory.outcomes import session_outcome
    from memory_anchor.worker.memory.provenance import quotes_a_tool

    asked = [_asked(_str(p)) for p in (prompts or []) if _str(p).strip()]
    asked = [a for a in asked if a]
    drafts = [d for d in (as_observation(o) for o in (observations or [])) if d is not None]
    last = _str(last_assistant_message)
    outcome = session_outcome(last)
    # A cause Claude repeats from a file it wrote or a tool's output is that text's, not a finding.
    tool_texts = [d.narrative or "" for d in drafts]
    outcome.root_causes = [c for c in outcome.root_causes if not quotes_a_tool(c, tool_texts)]

    # A request of a word or two ("continue", "yes", "go on") says what was wanted only with the turn
    # before it, which the session may not hold (a resumed one): the first prompt that says it leads.
    lead = next((n for n, a in enumerate(asked) if says_what_is_wanted(a)), 0)
    asked = asked[lead : lead + 1] + asked[:lead] + asked[lead + 1 :]
    request = asked[0] if asked else ""
    if len(asked) > 1:
        request += " | then: " + " | ".join(asked[1:4])
    discoveries = [d for d in drafts if d.type == "discovery"]
    changes = [d for d in drafts if d.type in _CHANGE_TYPES]
    investigated = "; ".join(unique((d.title for d in discoveries), 6))
    learned = "; ".join(
        unique(outcome.root_causes + ([f for d in discoveries for f in d.facts if not f.startswith("[")] or
                [d.summary for d in discoveries if d.outcome == "error"]), 5)
    )  # fmt: skip
    # A file's edit ("Edited app/cart.py") says what `changed` lists: what was done besides is the commands'.
    completed = "; ".join(unique(outcome.done + [d.title for d in changes if d.command or not d.files_modified], 8))
    # Files edited in place first (the fix), then files written or touched otherwise (new files, scratch scripts).
    edited = [f for d in drafts if d.tool_name in ("Edit", "MultiEdit", "NotebookEdit") for f in d.files_modified]
    written = edited + [f for d in drafts for f in d.files_modified]
    changed = unique([f for f in written if not _PLAN_FILE.search(f)], MAX_FILES)
    plans = [f for f in written if _PLAN_FILE.search(f)]
    files = unique(changed + plans + [f for d in drafts for f in d.files_read], MAX_FILES)
    summary = SessionSummaryDraft(
        request=request,
        investigated=investigated,
        learned=learned,
        completed=completed,
        next_steps="; ".join(outcome.next_steps),
        files=files,
        done=outcome.done,
        root_causes=outcome.root_causes,
        next=outcome.next_steps,
        files_changed=changed,
        tests=test_verdicts(drafts),
        asks_user=asks_user(last),
        distilled_by="local",
    )
    summary.text = summary.rendered_text()
    return summary


def says_what_is_wanted(asked: str) -> bool:
    """Whether a prompt's subject says what was wanted on its own: a slash command, or a few words
    (a few characters in a CJK script), not "continue", "yes please" or "继续"."""
    from memory_anchor.worker.store.cjk import written_in_cjk

    if asked.startswith("/"):
        return True
    if written_in_cjk(asked):
        return len(asked) >= 6
    return len(asked.split()) >= 3 and len(asked) >= 12


@functools.lru_cache(maxsize=4096)
def _asked(prompt: str) -> str:
    """What a prompt asks, as a summary lists it; kept, as every Stop of a session reads all its prompts again."""
    from memory_anchor.worker.memory.user_words import subject

    return shorten(subject(prompt), 200)


def test_verdicts(drafts: Iterable[ObservationDraft], limit: int = 3) -> list[str]:
    """Each test command's last verdict, with the failure it turned around: "`pytest -q`: 3 passed (failed before)"."""
    verdicts: dict[str, tuple[str, bool]] = {}  # command -> (last verdict, failed at some point)
    for draft in drafts:
        match = _TEST_TITLE.match(draft.title or "")
        if not match:
            continue
        command, verdict = match.groups()
        failed_before = verdicts.get(command, ("", False))[1] or draft.outcome == "error"
        verdicts.pop(command, None)  # the latest run goes last
        verdicts[command] = (verdict, failed_before)
    out = []
    for command, (verdict, failed) in list(verdicts.items())[-limit:]:
        turned = failed and not re.search(r"(?i)\b(fail|error)", verdict)
        out.append(f"{command}: {verdict}" + (" (failed before)" if turned else ""))
    return out


def asks_user(message: str) -> bool:
    """Does Claude's last message end by asking the user something (so the next prompt answers it)?"""
    tail = [line.strip() for line in (message or "").strip().splitlines() if line.strip()][-3:]
    return any(line.rstrip("*_ ").endswith(("?", "？")) for line in tail)
