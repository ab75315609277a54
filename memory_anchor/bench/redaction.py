"""Redaction on ordinary text: how often it fires where there is no secret, and how fast it runs.

    memory-anchor bench redaction                       # this repo's own source, docs and fixtures
    memory-anchor bench redaction --extra .venv/lib     # and any other tree of ordinary text

Every line of the corpus is redacted as a tool output would be. Source code,
docs, `git log` output and generated ids (git and SHA-256 hashes, UUIDs, Claude
tool-use ids) hold no real secret, so each marker is a false positive unless
the listing shows a fixture that is a secret on purpose. It prints the markers
per MB and per 100,000 lines, each hit with its context, the MB/s on the
corpus, and the PostToolUse payloads sanitized per second.
"""

from __future__ import annotations

import hashlib
import os
import random
import string
import subprocess
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TREES = ["memory_anchor", "hooks", "skills", "docs", "README.md", "tests/fixtures"]
TEXT_SUFFIXES = {".py", ".md", ".txt", ".json", ".jsonl", ".toml", ".cfg", ".js", ".html", ".css", ".yaml", ".yml", ".sh"}
# The redaction module and its tests hold secret shapes on purpose.
SKIP_NAMES = {"redact.py", "redaction.py"}


def _files(trees: list[Path]) -> list[Path]:
    found = []
    for tree in trees:
        if tree.is_file():
            found.append(tree)
            continue
        for directory, _, names in os.walk(tree):
            found.extend(Path(directory) / n for n in names if Path(n).suffix in TEXT_SUFFIXES and n not in SKIP_NAMES)
    return sorted(found)


def _generated_ids(count: int) -> str:
    """Ids captured text is full of: none of them is a secret."""
    rng = random.Random(15)
    alphabet = string.ascii_letters + string.digits
    lines = []
    for i in range(count):
        lines.append(f"commit {hashlib.sha1(str(i).encode()).hexdigest()}")
        lines.append(f"sha256:{hashlib.sha256(str(i).encode()).hexdigest()}")
        lines.append(f"session {uuid.UUID(int=rng.getrandbits(128), version=4)}")
        lines.append(f"toolu_01{''.join(rng.choice(alphabet) for _ in range(22))}")
    return "\n".join(lines)


def _git_log() -> str:
    try:
        done = subprocess.run(["git", "log", "--stat", "-n", "300"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def measure(texts: list[tuple[str, str]]) -> dict:
    """Redact every line of each (name, text); the markers found and the time it took."""
    from memory_anchor.core.redact import MARKER_PREFIX, redact_text

    hits: list[tuple[str, str]] = []
    kinds: dict[str, int] = {}
    lines = chars = 0
    started = time.perf_counter()
    for name, text in texts:
        for line in text.splitlines():
            lines += 1
            chars += len(line)
            out = redact_text(line)
            if out != line:
                at = max(out.find(MARKER_PREFIX) - 80, 0)
                hits.append((name, out[at : at + 160].strip()))
                for part in out.split(MARKER_PREFIX)[1:]:
                    kind = part.split("]", 1)[0]
                    kinds[kind] = kinds.get(kind, 0) + 1
    elapsed = time.perf_counter() - started
    return {"lines": lines, "chars": chars, "seconds": elapsed, "hits": hits, "kinds": kinds}


def _events_per_second(seconds: float = 2.0) -> float:
    from memory_anchor.schemas.settings import Settings
    from memory_anchor.worker.capture.sanitize import sanitize_event

    source = (ROOT / "memory_anchor" / "worker" / "pipeline" / "drain.py").read_text()
    payload = {
        "session_id": str(uuid.uuid4()), "transcript_path": "/home/dev/.claude/projects/x/s.jsonl", "cwd": "/home/dev/app",
        "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_01AbCdEfGhIjKlMnOpQrStUv",
        "tool_input": {"command": "pytest -q tests/test_pipeline.py", "description": "run the tests"},
        "tool_response": {"stdout": source[:8000], "stderr": "", "interrupted": False},
    }  # fmt: skip
    settings = Settings()
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        sanitize_event(payload, settings)
        done += 1
    return done / (time.perf_counter() - started)


def run(args) -> int:
    trees = [ROOT / t for t in DEFAULT_TREES] + [Path(p) for p in (args.extra or [])]
    texts = []
    for path in _files([t for t in trees if t.exists()]):
        try:
            texts.append((str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path), path.read_text("utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    files = len(texts)
    texts.append(("git log --stat", _git_log()))
    texts.append(("generated ids", _generated_ids(args.ids)))
    result = measure(texts)
    megabytes = result["chars"] / 1e6
    print(f"corpus: {files} files, git log, {4 * args.ids} generated ids: {result['lines']} lines, {megabytes:.1f} MB")
    print(f"markers on ordinary text: {len(result['hits'])} lines "
          f"({len(result['hits']) / max(megabytes, 1e-9):.2f} per MB, "
          f"{100_000 * len(result['hits']) / max(result['lines'], 1):.2f} per 100,000 lines)")  # fmt: skip
    for kind, count in sorted(result["kinds"].items(), key=lambda kv: -kv[1]):
        print(f"  {kind}: {count}")
    for name, out in result["hits"][: args.show]:
        print(f"  {name}: {out}")
    print(f"redaction speed, line by line: {megabytes / result['seconds']:.1f} MB/s")
    print(f"PostToolUse payloads (8 KB of output) sanitized: {_events_per_second():.0f} per second")
    return 0
