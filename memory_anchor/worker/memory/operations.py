"""L4 operational_knowledge: the project's `.ai/operations/` files, indexed read-only.

Developers write these Markdown/YAML files (SOPs, workflows, rules) and keep them
in git; Memory Anchor only reads them. Each file is a record of kind `operation`
on `main` (title = path relative to the project); re-indexing compares content
hashes, so a changed file gets a new version and a deleted one a tombstone.
A search re-indexes first when the directory changed (cheap stat check), then
matches file names and contents and returns each hit with its path.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import Any

from memory_anchor.schemas.memory_model import OPERATIONAL
from memory_anchor.worker.memory.common import tokens
from memory_anchor.worker.memory.finder import Finder
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import MAIN, Records, resolve_view

log = logging.getLogger(__name__)

OPERATIONS_DIR = Path(".ai") / "operations"
SUFFIXES = {".md", ".markdown", ".yaml", ".yml"}
MAX_FILE_BYTES = 256 * 1024
ACTOR = "system:operations-index"


class OperationsIndex:
    def __init__(self, db: Database, finder: Finder):
        self.db = db
        self.finder = finder
        self._signatures: dict[str, tuple] = {}
        self._lock = threading.Lock()

    @staticmethod
    def directory(project: str) -> Path:
        return Path(project) / OPERATIONS_DIR

    def _scan(self, project: str) -> dict[str, Path]:
        root = self.directory(project)
        if not project or not root.is_dir():
            return {}
        files = {}
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix.lower() in SUFFIXES and not any(p.startswith(".") for p in path.relative_to(root).parts):
                files[str(path.relative_to(project))] = path
        return files

    def _signature(self, files: dict[str, Path]) -> tuple:
        sig = []
        for rel, path in files.items():
            try:
                st = path.stat()
            except OSError:
                continue
            sig.append((rel, st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def sync(self, project: str, *, force: bool = True) -> dict[str, int]:
        """Bring the index of a project's operations in line with its files."""
        counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0}
        with self._lock:
            files = self._scan(project)
            signature = self._signature(files)
            if not force and self._signatures.get(project) == signature:
                return counts
            with self.db.transaction() as conn:
                view = resolve_view(conn, MAIN)
                indexed, _ = Records.query(conn, view, filters={"kind": "operation", "project": project}, limit=100_000)
                by_path = {r["title"]: r for r in indexed}
                for rel, path in files.items():
                    try:
                        raw = path.read_bytes()[:MAX_FILE_BYTES]
                    except OSError:
                        log.warning("cannot read %s", path)
                        continue
                    text = raw.decode("utf-8", "replace")
                    digest = hashlib.sha256(raw).hexdigest()
                    data = {"path": str(path), "relpath": rel, "sha256": digest, "format": path.suffix.lower().lstrip(".")}
                    current = by_path.pop(rel, None)
                    if current is None:
                        Records.put(conn, "operation", text, branch=MAIN, actor=ACTOR, reason="INDEX", layer=OPERATIONAL,
                                    project=project, title=rel, type=data["format"], data=data)  # fmt: skip
                        counts["added"] += 1
                    elif current["data"].get("sha256") != digest:
                        Records.update(conn, current["id"], branch=MAIN, actor=ACTOR, reason="REINDEX (file changed)",
                                       view=view, text=text, data=data)  # fmt: skip
                        counts["updated"] += 1
                    else:
                        counts["unchanged"] += 1
                for gone in by_path.values():
                    Records.delete(conn, gone["id"], branch=MAIN, actor=ACTOR, reason="UNINDEX (file removed)", view=view)
                    counts["removed"] += 1
            self._signatures[project] = signature
        return counts

    def search(self, query: str, project: str, *, limit: int = 5) -> list[dict[str, Any]]:
        """Files whose name or content matches; each hit carries its `path`."""
        try:
            self.sync(project, force=False)
        except Exception:  # a broken file tree must not break recall of the other layers
            log.warning("re-indexing %s failed", self.directory(project), exc_info=True)
        conn = self.db.reader()
        view = resolve_view(conn, MAIN)
        rows, _ = Records.query(conn, view, filters={"kind": "operation", "project": project}, limit=10_000)
        if not rows:
            return []
        wanted = set(tokens(query))
        scored: dict[str, dict[str, Any]] = {}
        for row in rows:  # file-name match: `error_handling.md` answers "error handling"
            name_words = set(tokens(Path(row["title"]).stem.replace("_", " ").replace("-", " ")))
            overlap = len(wanted & name_words)
            if overlap:
                scored[row["id"]] = {**row, "score": 1.0 + overlap / max(len(name_words), 1), "match": "file_name"}
        for hit in self.finder.find(query, view, filters={"kind": "operation", "project": project}, limit=limit,
                                    recent_fallback=False, conn=conn):  # fmt: skip
            if hit["id"] in scored:
                scored[hit["id"]]["score"] += float(hit.get("score") or 0.0)
            else:
                record = Records.get(conn, hit["id"], view)
                if record is not None:
                    scored[hit["id"]] = {**record, "score": float(hit.get("score") or 0.0), "match": "content"}
        hits = sorted(scored.values(), key=lambda h: -h["score"])[:limit]
        for hit in hits:
            hit["path"] = hit["data"].get("path")
        return hits
