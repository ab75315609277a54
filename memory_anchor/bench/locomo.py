"""`memory-anchor bench locomo --data FILE`: turn-level retrieval recall on LoCoMo.

The measure (shared/bench/README.md): every turn of a conversation is stored as
one memory through the mem0-compatible API (`infer: false`, `"<speaker>: <text>"`
plus the photo caption if any, the turn's `dia_id` in metadata, the session's
date as `timestamp`, the conversation id as `user_id`); every question of
categories 1-4 is searched with `top_k` and `filters.user_id`; recall@k is the
share of the question's evidence dia_ids among the top k, averaged over questions.

One run reports the default (hybrid) search, keyword-only (BM25) and vector-only
side by side, overall and per category, plus search latency. The worker is a
real process on a real port in a throw-away data dir; nothing here knows about
the ranking, so the benchmark path is the user's path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("hybrid", "keyword", "vector")
MODE_LABELS = {"hybrid": "default (hybrid)", "keyword": "BM25 only", "vector": "dense only"}
KS = (5, 10, 20)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str
    timestamp: str  # ISO 8601, the session's date


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def parse_session_date(value: str) -> str:
    """"1:56 pm on 8 May, 2023" -> ISO 8601 (UTC)."""
    cleaned = " ".join(value.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=timezone.utc).isoformat()
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date: {value!r}")


def normalise_dia_ids(raw: Iterable[str]) -> frozenset[str]:
    """Evidence ids as "D<session>:<turn>"; a few in the data are malformed ("D8:6; D9:17", "D:11:26")."""
    out = set()
    for item in raw:
        for part in str(item).split(";"):
            numbers = re.findall(r"\d+", part)
            if len(numbers) >= 2:
                out.add(f"D{int(numbers[0])}:{int(numbers[1])}")
    return frozenset(out)


def turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = (turn.get("blip_caption") or "").strip()
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def load(path: Path | str) -> list[Conversation]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        sessions = sorted(
            (int(m[1]), key)
            for key in conv
            if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conv[key], list)
        )
        turns = []
        for number, key in sessions:
            stamp = parse_session_date(conv[f"session_{number}_date_time"])
            for turn in conv[key]:
                turns.append(Turn(turn["dia_id"], turn_text(turn), stamp))
        questions = tuple(
            Question(qa["question"], normalise_dia_ids(qa.get("evidence", [])), int(qa["category"]))
            for qa in sample["qa"]
            if int(qa.get("category", 0)) in CATEGORIES and qa.get("evidence")
        )
        conversations.append(Conversation(sample["sample_id"], tuple(turns), questions))
    return conversations


# --- scoring -------------------------------------------------------------------------

SearchFn = Callable[[str, str, int, str], list[str]]  # (query, user_id, top_k, mode) -> dia_ids


def evaluate(conversations: list[Conversation], search: SearchFn, modes: Iterable[str] = MODES) -> dict:
    """recall@k per mode, overall and per category, and per-mode latencies (ms)."""
    top = max(KS)
    sums: dict[str, dict] = {m: defaultdict(lambda: defaultdict(float)) for m in modes}
    counts: dict[int, int] = defaultdict(int)
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    for conv in conversations:
        for question in conv.questions:
            counts[question.category] += 1
            for mode in modes:
                start = time.perf_counter()
                found = search(question.text, conv.sample_id, top, mode)
                latencies[mode].append((time.perf_counter() - start) * 1000)
                for k in KS:
                    hit = len(question.evidence & set(found[:k])) / len(question.evidence)
                    sums[mode][question.category][k] += hit
    total = sum(counts.values())
    report = {"questions": total, "per_category_questions": dict(counts), "modes": {}}
    for mode in modes:
        per_cat = {
            cat: {k: sums[mode][cat][k] / counts[cat] for k in KS} for cat in sorted(counts) if counts[cat]
        }
        overall = {k: sum(sums[mode][cat][k] for cat in counts) / max(total, 1) for k in KS}
        report["modes"][mode] = {
            "overall": overall,
            "per_category": per_cat,
            "latency_ms": {"p50": percentile(latencies[mode], 0.5), "p95": percentile(latencies[mode], 0.95)},
        }
    return report


def percentile(values: list[float], q: float) -> float:
    """The value at fraction `q` (0..1) of the sorted values, 0.0 for none: every benchmark's p50/p95."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def format_report(report: dict) -> str:
    lines = [f"LoCoMo turn-level retrieval: {report['questions']} questions (categories 1-4)"]
    header = f"{'search':<18} {'category':<14} {'n':>5} " + " ".join(f"{'R@' + str(k):>7}" for k in KS)
    lines.append(header)
    for mode, result in report["modes"].items():
        label = MODE_LABELS.get(mode, mode)
        row = result["overall"]
        lines.append(f"{label:<18} {'all':<14} {report['questions']:>5} " + " ".join(f"{row[k]:>7.3f}" for k in KS))
        for cat, row in result["per_category"].items():
            n = report["per_category_questions"][cat]
            name = f"{cat} {CATEGORIES[cat]}"
            lines.append(f"{'':<18} {name:<14} {n:>5} " + " ".join(f"{row[k]:>7.3f}" for k in KS))
    lines.append("")
    lines.append("search latency through the API (ms):")
    for mode, result in report["modes"].items():
        lat = result["latency_ms"]
        lines.append(f"  {MODE_LABELS.get(mode, mode):<18} p50 {lat['p50']:.1f}  p95 {lat['p95']:.1f}")
    default = report["modes"].get("hybrid")
    if default:
        lines.append(f"target: recall@10 >= 0.90 (default search: {default['overall'][10]:.3f})")
    return "\n".join(lines)


# --- backends ------------------------------------------------------------------------


class ApiBackend:
    """Stores and searches through a running worker's HTTP API (the user's path)."""

    def __init__(self, client):
        self.client = client

    def store(self, conv: Conversation) -> None:
        for turn in conv.turns:
            self.client.post(
                "/api/v1/memories",
                {
                    "messages": [{"role": "user", "content": turn.text}],
                    "user_id": conv.sample_id,
                    "metadata": {"dia_id": turn.dia_id},
                    "timestamp": turn.timestamp,
                    "infer": False,
                },
            )

    def search(self, query: str, user_id: str, top_k: int, mode: str) -> list[str]:
        body = {"query": query, "filters": {"user_id": user_id}, "top_k": top_k}
        if mode != "hybrid":  # the default search sends no mode, as a user would
            body["mode"] = mode
        results = self.client.post("/api/v1/memories/search", body)["results"]
        return [(r.get("metadata") or {}).get("dia_id") for r in results]


class InProcessBackend:
    """The same service calls the API makes, without HTTP: for quick tuning runs only."""

    def __init__(self, data_dir: Path, tuning=None, storage_url: str | None = None):
        from memory_anchor.worker.index.embeddings import Embedder
        from memory_anchor.worker.index.indexer import Indexer
        from memory_anchor.worker.index.search import SearchService
        from memory_anchor.worker.index.vectors import Vectors
        from memory_anchor.worker.store.db import Database

        from memory_anchor.core import paths

        self.embedder = Embedder()
        if storage_url:
            # A team database (after `storage init` and `add-member`): vectors in it, followed by seq.
            from memory_anchor.worker.index.database_vectors import DatabaseVectorStore
            from memory_anchor.worker.index.follower import LogFollower
            from memory_anchor.worker.store.postgres.database import PostgresDatabase

            self.db = PostgresDatabase(storage_url)
            self.vectors = Vectors(store=DatabaseVectorStore(self.db))
            self.indexer = LogFollower(self.db, self.vectors, self.embedder)
            follower = self.indexer
        else:
            self.db = Database(paths.database_path(data_dir))
            self.vectors = Vectors(paths.chroma_path(data_dir))
            self.indexer = Indexer(self.db, self.vectors, self.embedder)
            follower = None
        self.service = SearchService(self.db, self.vectors, self.embedder, tuning=tuning, follower=follower)

    def store(self, conv: Conversation) -> None:
        from memory_anchor.worker.store.records import Records, parse_time

        with self.db.transaction() as conn:
            for turn in conv.turns:
                Records.put(
                    conn,
                    "memory",
                    turn.text,
                    actor=conv.sample_id,
                    user_id=conv.sample_id,
                    metadata={"dia_id": turn.dia_id, "role": "user"},
                    happened_at=parse_time(turn.timestamp),
                )
        self.indexer.drain()

    def search(self, query: str, user_id: str, top_k: int, mode: str) -> list[str]:
        from memory_anchor.worker.store.records import resolve_view

        view = resolve_view(self.db.reader(), "main")
        hits = self.service.search(query, view, filters={"user_id": user_id}, top_k=top_k, mode=mode)
        return [h["metadata"].get("dia_id") for h in hits]


def run(args) -> int:
    conversations = load(args.data)
    work = Path(args.work_dir) if getattr(args, "work_dir", None) else Path(tempfile.mkdtemp(prefix="ma-bench-locomo-"))
    data_dir = work / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    limit = getattr(args, "conversations", None)
    if limit:
        conversations = conversations[:limit]
    turns = sum(len(c.turns) for c in conversations)
    print(f"LoCoMo: {len(conversations)} conversations, {turns} turns (data in {data_dir})", flush=True)
    if getattr(args, "in_process", False) or getattr(args, "storage_url", None):
        backend = InProcessBackend(data_dir, storage_url=getattr(args, "storage_url", None))
        return _measure(backend, conversations)
    from memory_anchor.client.worker_client import WorkerClient
    from memory_anchor.core import lifecycle

    os.environ["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    os.environ["MEMORY_ANCHOR_LLM_ROUTE"] = "local"  # nor the Claude Code login: these measure the local path
    lifecycle.start_background(data_dir, wait=120)
    try:
        backend = ApiBackend(WorkerClient(data_dir, timeout=300, autostart=False))
        return _measure(backend, conversations)
    finally:
        lifecycle.stop(data_dir)


def _measure(backend, conversations: list[Conversation]) -> int:
    start = time.perf_counter()
    for conv in conversations:
        backend.store(conv)
    elapsed = time.perf_counter() - start
    turns = sum(len(c.turns) for c in conversations)
    print(f"stored {turns} turns in {elapsed:.1f} s ({turns / max(elapsed, 1e-9):.0f}/s)", flush=True)
    report = evaluate(conversations, backend.search)
    print(format_report(report), flush=True)
    return 0
