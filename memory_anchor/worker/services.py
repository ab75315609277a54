"""The services a worker runs, built once and shared by every handler.

Handlers reach them as `request.app["services"]`. Heavy parts (the embedding
model, Chroma, the Claude client) are built on first use so that the worker
answers its first requests (and acknowledges hook events) without waiting.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, TypeVar

from memory_anchor.core import paths, projects
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.capture.inbox import Arrival, Inbox
from memory_anchor.worker.capture.sanitize import sanitize_event
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.disk import DiskGuard
from memory_anchor.worker.store.group_commit import GroupCommit

log = logging.getLogger(__name__)
T = TypeVar("T")


class Services:
    def __init__(self, data_dir: Path, settings: Settings, token: str):
        self.data_dir = Path(data_dir)
        self.settings = settings
        self.token = token
        self.started_at = time.time()
        # Two databases, which are one on a single machine:
        # - capture_db, always the local SQLite file: what belongs to this machine (the inbox and
        #   its quarantine, the LLM budget), so capture never waits on a network;
        # - db, the memory: records, branches, snapshots, merges, sessions and the memory model's
        #   tables. The same SQLite file, or the team's PostgreSQL database with `storage_url`.
        self.capture_db = Database(paths.database_path(self.data_dir))
        self.db = self.capture_db if not settings.storage_url else _team_database(settings.storage_url)
        self.disk = DiskGuard(self.data_dir, paths.log_path(self.data_dir).parent)
        # Spooled events are stored as hooks wrote them unless cleaned like posted ones.
        self.inbox = Inbox(self.capture_db, clean=lambda payload: sanitize_event(payload, settings))
        # API work (searches, writes) on two threads; the pipeline on its own
        # thread at a lower OS priority, so that distilling and embedding never
        # slow down accepting hook events or answering searches.
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ma-api")
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ma-pipeline", initializer=_lower_priority)
        # Indexing (embedding what the pipeline wrote) runs beside it, as low: see Pipeline.run.
        self.indexing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ma-index", initializer=_lower_priority)
        # The warm-up on a thread of its own: on the pipeline's, the first events waited for the
        # model and the vector index to load, and so did a stop (the pipeline's last stage queued
        # behind it).
        self.warming = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ma-warm-up", initializer=_lower_priority)
        # Hook events posted together are committed together (still each before its 202).
        self.event_commits: GroupCommit[Arrival, tuple[int, bool]] = GroupCommit(self.inbox.accept_many, self.run)
        # So are mem0 adds stored as given (infer false): one transaction for all that arrive together.
        self.memory_adds = GroupCommit(self._store_adds, self.run, alone_on_error=True)
        # Shutdown does not wait for the warm-up's model load (see warm_up and close).
        self._closing = threading.Event()
        self._warm_store_step = threading.Lock()

    def _store_adds(self, adds):
        from memory_anchor.worker.memory.memories import MemoryService

        return MemoryService(self).store_many(adds)

    # --- built on first use --------------------------------------------------

    @cached_property
    def embedder(self):
        from memory_anchor.worker.index.embeddings import Embedder

        return Embedder()

    @cached_property
    def vectors(self):
        from memory_anchor.worker.index.vectors import Vectors

        if self.shared_store:
            # Vectors live beside their records in the team database: shared in the same commit,
            # readable exactly when the record is (docs/benchmarks.md: where vectors live).
            from memory_anchor.worker.index.database_vectors import DatabaseVectorStore

            return Vectors(store=DatabaseVectorStore(self.db))
        from memory_anchor.worker.index.chroma_store import ChromaStore

        store = ChromaStore(paths.chroma_path(self.data_dir), child_idle_seconds=self.settings.chroma_idle_seconds)
        return Vectors(store=store, snapshot=paths.vector_snapshot_path(self.data_dir))

    @cached_property
    def indexer(self):
        """What makes records searchable by vector: on one machine the queue the records' trigger
        fills (indexer.py); on a team database a follower of the shared log (follower.py)."""
        if self.shared_store:
            from memory_anchor.worker.index.follower import LogFollower

            return LogFollower(self.db, self.vectors, self.embedder)
        from memory_anchor.worker.index.indexer import Indexer

        return Indexer(self.db, self.vectors, self.embedder)

    @cached_property
    def reembedder(self):
        from memory_anchor.worker.index.reembed import Reembedder

        return Reembedder(self.db, self.vectors, self.indexer, self.embedder.model_id, self.data_dir)

    @cached_property
    def search(self):
        from memory_anchor.worker.index.search import SearchService

        # The indexer too on one machine: a dense search first waits for the vectors of adds already acknowledged.
        return SearchService(self.db, self.vectors, self.embedder, follower=self.indexer)

    @cached_property
    def llm(self):
        from memory_anchor.worker.llm.client import ClaudeClient

        return ClaudeClient(self.settings, self.capture_db)  # the daily budget is this machine's

    @cached_property
    def memory(self):
        """The memory model: layers, approvals, conflicts, relations, fact extraction."""
        from memory_anchor.worker.memory import MemoryModel

        return MemoryModel.for_services(self)

    @cached_property
    def codebase(self):
        """The code memories are about: refs kept when records are written, marks when shown."""
        from memory_anchor.worker.codebase.service import Codebase

        return Codebase()

    @cached_property
    def context_services(self):
        """What the briefing and recall read (memory_anchor/worker/context/model.py)."""
        from memory_anchor.worker.context.model import ContextServices

        return ContextServices(settings=self.settings, reader=self.db.reader, memory=self.memory,
                               codebase=self.codebase, search=lambda: self.search)  # fmt: skip

    @property
    def facts(self):
        """Fact management for the mem0 API's `infer: true` path (add_from_messages)."""
        return self.memory

    @cached_property
    def distiller(self):
        from memory_anchor.worker.pipeline.compress import Distiller

        return Distiller(self.settings, self.llm)

    # --- helpers -------------------------------------------------------------

    pipeline = None  # set by the app once the pipeline runs
    _reembedding: threading.Thread | None = None

    def warm_up(self) -> None:
        """Load the embedding model and the vector index now rather than at the first search;
        vectors of another model are re-embedded on a thread of their own (memory_anchor/worker/index/reembed.py).

        A worker asked to stop meanwhile does not wait for the model to load (1-3 s of CPU, and
        every short-lived worker paid it at exit): loading only reads the model and writes its
        cache atomically, hash-checked at the next load. The steps that touch the stores run under
        `_warm_store_step`, which `close` waits for, and are skipped once closing.
        """
        if not self.shared_store:
            with self._warm_store_step:
                if self._closing.is_set():
                    return
                self.scrub_vector_files()
        self.embedder.embed(["warm up"])
        if self.shared_store:
            return  # the follower loads the team's vectors on its first catch-up, which may wait for the server
        # Chroma is not imported here: it runs in a child process (index/chroma_child.py), started
        # when the load below finds the vector snapshot stale, or with the first vector written.
        with self._warm_store_step:
            if self._closing.is_set():
                return
            self.vectors.load()
            if self.reembedder.needed():
                self._reembedding = threading.Thread(target=self._reembed, name="ma-reembed", daemon=True)
                self._reembedding.start()

    def scrub_vector_files(self) -> None:
        """Once per data dir: clear the freed memory older versions left in Chroma's index files
        (memory_anchor/worker/index/scrub.py). Writes to Chroma wait meanwhile; searches and capture do not."""
        from memory_anchor.worker.index.scrub import ChromaScrub

        scrub = ChromaScrub(self.data_dir, paths.chroma_path(self.data_dir))
        if scrub.needed():
            with self.vectors.store.while_closed():
                scrub.run()

    def _reembed(self) -> None:
        _lower_priority()
        try:
            self.reembedder.run()
        except Exception:
            log.exception("re-embedding failed; the next start resumes it")

    def reembedding(self) -> dict[str, Any] | None:
        """How far a background re-embedding has got, or None."""
        reembedder = self.__dict__.get("reembedder")
        return reembedder.progress() if reembedder is not None else None

    def llm_available(self) -> bool:
        try:
            return bool(self.llm.available)
        except Exception:
            return False

    def llm_status(self) -> dict[str, Any]:
        """Which route reaches Claude and why, and today's spend (may run `claude` once: call off the loop)."""
        try:
            route = self.llm.route
            reason = self.llm.unavailable_reason()
            return {
                "available": reason is None,
                **route.to_json(),
                "active": f"{route.name}: {route.reason}",
                "unavailable_reason": reason,
                "usage_today": self.llm.usage_today(),
                "daily_token_budget": self.settings.llm_daily_token_budget,
            }
        except Exception as exc:  # a status page must answer whatever the route's state
            log.warning("cannot tell the Claude route: %s", exc)
            return {"available": False, "route": "local", "reason": f"cannot tell: {exc}"}

    @property
    def shared_store(self) -> bool:
        """Whether the memory lives apart from capture (a team database)."""
        return self.db is not self.capture_db

    @property
    def project_names(self) -> str:
        """How projects are named (memory_anchor/core/projects.py): by their git remote on a team
        database, where each developer's clone sits in a directory of its own; else by path."""
        return projects.BY_REMOTE if self.shared_store else projects.BY_PATH

    def project_for_cwd(self, cwd: str | None) -> str:
        return projects.project_for_cwd(cwd, self.project_names)

    def store_unreachable(self) -> str | None:
        """None when the memory can be read and written now, else why not (may ask the server)."""
        if not self.shared_store:
            return None
        return self.db.unreachable_reason()

    def store_description(self) -> dict[str, Any]:
        """Where the memory lives and whether it answers, for status pages (may ask the server)."""
        if not self.shared_store:
            return {"backend": "sqlite", "reachable": True, "reason": None}
        reason = self.store_unreachable()
        return {"backend": "postgresql", "url": self.db.shown_url, "reachable": reason is None, "reason": reason}

    def session_branch(self, session_id: str | None) -> str | None:
        """The branch a known session writes to, or None.

        A session is known from its first processed event, or earlier from the
        branch chosen for it (a fork the SessionStart hook announced, a switch).
        """
        if not session_id:
            return None
        from memory_anchor.worker.store.sessions import chosen_branch, session_branch

        conn = self.db.reader()
        return session_branch(conn, session_id) or chosen_branch(conn, session_id)

    async def run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking work (SQLite writes, embedding, search) off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(func, *args, **kwargs))

    async def run_background(self, func: Callable[..., T], *args: Any) -> T:
        """Run pipeline work on the low-priority thread."""
        return await _on(self.background, func, *args)

    async def run_warm_up(self) -> None:
        """Run `warm_up` on its low-priority thread."""
        await _on(self.warming, self.warm_up)

    async def run_indexing(self, func: Callable[..., T], *args: Any) -> T:
        """Run indexing work on its low-priority thread."""
        return await _on(self.indexing, func, *args)

    def hand_back_memory(self) -> None:
        """After a burst, once idle: what the burst left allocated goes back to the OS.

        Bounded caches refill on demand; the zeroing of freed memory (heap.py) is untouched, it
        applies to what is freed here like to anything else.
        """
        import gc

        from memory_anchor.core.redact import forget_clean_texts
        from memory_anchor.worker.index import heap

        gc.collect()  # cycles left by the burst (request and record dicts), so their blocks are free
        forget_clean_texts()
        indexer = self.__dict__.get("indexer")
        if indexer is not None and hasattr(indexer, "release_memory"):
            indexer.release_memory()
        sessions = getattr(self.pipeline, "sessions", None)
        if sessions is not None:
            sessions.release_memory()
        for db in {id(self.capture_db): self.capture_db, id(self.db): self.db}.values():
            if hasattr(db, "release_memory"):
                db.release_memory()
        heap.release_free_memory()

    def close(self) -> None:
        self._closing.set()
        with self._warm_store_step:  # a warm-up step on the stores ends first; none starts after
            pass
        if self._reembedding is not None:
            self.reembedder.stop()
            self._reembedding.join(timeout=30)
        # So whatever the warm-up still does (loading the model, importing Chroma) writes nothing
        # the next start needs: not waited for. The process ends with os._exit
        # (memory_anchor/worker/__main__.py), which does not join its thread either.
        self.warming.shutdown(wait=False, cancel_futures=True)
        self.background.shutdown(wait=True, cancel_futures=True)
        self.indexing.shutdown(wait=True, cancel_futures=True)
        self.executor.shutdown(wait=True, cancel_futures=True)
        indexer = self.__dict__.get("indexer")
        if indexer is not None and hasattr(indexer, "stop"):
            indexer.stop()
        vectors = self.__dict__.get("vectors")
        if vectors is not None and hasattr(vectors, "close"):
            vectors.close()
        if self.shared_store:
            self.db.close()
        self.capture_db.close()


async def _on(executor: ThreadPoolExecutor, func: Callable[..., T], *args: Any) -> T:
    """`func(*args)` on one of the worker's threads, awaited from the event loop."""
    return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(func, *args))


def _team_database(url: str):
    # Imported here: a single-machine worker never loads the PostgreSQL driver.
    from memory_anchor.worker.store.postgres.team import TeamDatabase

    return TeamDatabase(url)


def _lower_priority() -> None:
    """Nice the calling thread (Linux threads have their own priority); elsewhere a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass
