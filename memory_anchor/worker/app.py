"""The worker's one aiohttp Application: every route is listed here.

`run_worker()` is what `memory-anchor worker run` (and `python -m memory_anchor.worker run`)
executes: take the data dir's lock, open the stores, listen on loopback, write
worker.json, drain the inbox until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal
import time
from pathlib import Path

from aiohttp import web

from memory_anchor.core import paths
from memory_anchor.core.private import make_private, private_umask
from memory_anchor.core.processes import ALREADY_RUNNING_EXIT
from memory_anchor.core.version import __version__
from memory_anchor.schemas.settings import SettingsError, load_settings
from memory_anchor.core import lifecycle
from memory_anchor.worker.api import admin, branches, context, events, health, memories, portability, timeline, viewer
from memory_anchor.worker.api import corrections, live, mem0_platform, memory_model, verify
from memory_anchor.worker.api.hosts import allowed_hosts, host_middleware
from memory_anchor.worker.api.mcp_endpoint import McpEndpoint
from memory_anchor.worker.api.middleware import auth_middleware, error_middleware
from memory_anchor.worker.capture.live import LiveFeed
from memory_anchor.worker.index import heap
from memory_anchor.worker.logs import setup_logging
from memory_anchor.worker.services import Services

log = logging.getLogger(__name__)

# A hook payload can carry a multi-megabyte tool output; it is truncated, not refused.
MAX_REQUEST_BYTES = 64 * 1024 * 1024

ROUTE_TABLES = [
    health.routes,
    events.routes,
    memories.routes,
    branches.routes,
    timeline.routes,
    context.routes,
    portability.routes,
    admin.routes,
    viewer.routes,
    memory_model.routes,
    corrections.routes,
    mem0_platform.routes,
    live.routes,
    verify.routes,
]


def create_app(services: Services, *, start_pipeline: bool = True) -> web.Application:
    app = web.Application(
        middlewares=[error_middleware, host_middleware, auth_middleware], client_max_size=MAX_REQUEST_BYTES
    )
    app["services"] = services
    app["allowed_hosts"] = allowed_hosts(services.settings.host)
    app["live"] = LiveFeed()
    app.on_startup.append(_bind_live_feed)
    app.on_shutdown.append(_close_live_feed)  # open streams end, so shutdown does not wait on them
    for table in ROUTE_TABLES:
        app.add_routes(table)
    if start_pipeline:
        app.cleanup_ctx.append(_pipeline_ctx)
    app.cleanup_ctx.append(_disk_ctx)
    return app


async def _bind_live_feed(app: web.Application) -> None:
    app["live"].bind(asyncio.get_running_loop())


async def _close_live_feed(app: web.Application) -> None:
    app["live"].close()


async def _disk_ctx(app: web.Application):
    """Keep the disk-full reserve in place, and notice when a full disk has room again."""
    disk = app["services"].disk
    await asyncio.get_running_loop().run_in_executor(None, disk.keep_reserve)

    async def watch() -> None:
        while True:
            await asyncio.sleep(2.0)
            if disk.full_since is not None and await asyncio.get_running_loop().run_in_executor(
                None, disk.check_recovered
            ):
                # Spool files whose ingestion failed for lack of space: on the pipeline's thread.
                spool = paths.spool_path(app["services"].data_dir)
                await app["services"].run_background(app["services"].inbox.recover_claimed_spools, spool)

    task = asyncio.create_task(watch(), name="disk-watch")
    yield
    task.cancel()


async def _pipeline_ctx(app: web.Application):
    from memory_anchor.worker.pipeline.drain import Pipeline

    services: Services = app["services"]
    pipeline = Pipeline(services)
    services.pipeline = pipeline
    app["pipeline"] = pipeline
    pipeline.after_event.append(app["live"].changed)  # the viewer's live timeline
    pipeline.after_event.append(services.memory.on_pipeline_event)  # fact extraction, session end
    maintenance = asyncio.create_task(_memory_maintenance(services), name="memory-maintenance")
    task = asyncio.create_task(pipeline.run(), name="pipeline")
    warm = asyncio.create_task(_warm_up(services), name="warm-up")
    code_watch = asyncio.create_task(_code_watch(services), name="code-watch")
    hand_back = asyncio.create_task(_hand_back_when_idle(services), name="hand-back")
    yield
    hand_back.cancel()
    pipeline.stop()
    warm.cancel()
    code_watch.cancel()
    maintenance.cancel()
    try:
        await asyncio.wait_for(task, timeout=10)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        task.cancel()


async def _memory_maintenance(services: Services, every_seconds: float = 3600.0) -> None:
    """The memory model's periodic job: archive expired events, purge old identity removals, demote facts
    whose files are gone (MemoryModel.maintain)."""
    while True:
        try:
            await services.run(services.memory.maintain)
        except Exception:
            log.exception("memory maintenance failed; will retry")
        await asyncio.sleep(every_seconds)


# The worker counts as idle when it used less than IDLE_CPU of a core over IDLE_SECONDS; after
# at least BURST_CPU_SECONDS of work since the last hand-back, it then hands memory back once.
IDLE_SECONDS = 10.0
IDLE_CPU = 0.02
BURST_CPU_SECONDS = 1.0


async def _hand_back_when_idle(services: Services) -> None:
    """After a burst (an import, a long session, a bulk add) the worker returns close to its
    fresh size once idle: a burst left tens of MB in malloc's arenas, SQLite's page caches and
    the model's arena, which nothing would take back otherwise."""
    cpu = time.process_time  # the whole process's CPU, every thread's
    handed_back_at = cpu()
    while True:
        before = cpu()
        await asyncio.sleep(IDLE_SECONDS)
        now = cpu()
        if now - before < IDLE_CPU * IDLE_SECONDS and now - handed_back_at >= BURST_CPU_SECONDS:
            try:
                await asyncio.get_running_loop().run_in_executor(None, services.hand_back_memory)
            except Exception:
                log.exception("handing memory back failed; the next idle spell tries again")
            handed_back_at = cpu()


async def _code_watch(services: Services, every_seconds: float = 2.0) -> None:
    """When a repository's HEAD moves (a commit between sessions), ask git on the pipeline's thread
    what the next SessionStart's staleness marks will need (memory_anchor/worker/codebase/service.py: warm),
    and record what the commit changed for memory: facts whose files it deleted or moved are demoted,
    next steps it did are closed (the briefing shows both, computed, without writing)."""
    while True:
        await asyncio.sleep(every_seconds)
        try:
            if services.settings.code_checks:  # off: nothing is checked, so nothing to ask ahead
                if await services.run_background(services.codebase.warm):
                    await services.run_background(services.memory.check_facts_against_code)
                    await services.run_background(services.memory.close_steps_done)
        except Exception:
            log.exception("warming the code history failed; the next check asks git itself")


async def _warm_up(services: Services) -> None:
    """Load the embedding model and vectors before the first search needs them."""
    try:
        await services.run_warm_up()
    except Exception:
        log.exception("warm-up failed; the first search will load what it needs")


def run_worker(data_dir: Path | None = None, *, port: int | None = None) -> int:
    data_dir = Path(data_dir or paths.data_dir())
    private_umask()  # what the worker, SQLite and Chroma create from here on is the user's alone
    heap.configure_malloc()  # before any thread starts
    heap.clear_reused_memory()  # before any request: no secret left in freed memory reaches a file
    try:
        lock = lifecycle.acquire_lock(data_dir)
    except lifecycle.AlreadyRunning as exc:
        print(f"memory-anchor: {exc}", flush=True)
        return ALREADY_RUNNING_EXIT
    try:
        settings = load_settings(data_dir)
    except SettingsError as exc:
        print(f"memory-anchor: {exc}", flush=True)
        lock.close()
        return 2
    tightened = make_private(data_dir)  # what an earlier version left readable by other users
    setup_logging(paths.log_path(data_dir), settings.log_level)
    if tightened:
        log.info("made %d files and folders of %s private to their user", tightened, data_dir)
    token = secrets.token_urlsafe(32)
    services = Services(data_dir, settings, token)
    recovered = services.inbox.recover_claimed_spools(paths.spool_path(data_dir))
    spooled = services.inbox.ingest_spool(paths.spool_path(data_dir))
    log.info("starting worker %s in %s (spool: %d events, %d recovered)", __version__, data_dir, spooled, recovered)
    try:
        asyncio.run(_serve(services, settings.host, port if port is not None else settings.port))
    finally:
        lifecycle.remove_info(data_dir)
        services.close()
        lock.close()
    log.info("worker stopped")
    return 0


async def _serve(services: Services, host: str, port: int) -> None:
    app = create_app(services)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    sock = lifecycle.bind_socket(host, port)
    site = web.SockSite(runner, sock)
    await site.start()
    bound = sock.getsockname()[1]
    mcp = McpEndpoint(services.data_dir, services.token)
    mcp_port = await mcp.start(host)
    lifecycle.write_info(services.data_dir, lifecycle.new_info(bound, services.token, host, mcp_port, services.project_names))
    print(f"Memory Anchor worker listening on http://{host}:{bound} (data in {services.data_dir})", flush=True)
    log.info("listening on %s:%d", host, bound)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()

    def request_stop(signum, frame) -> None:
        # Plain handlers, left in place through shutdown: a second SIGTERM or
        # Ctrl-C while stopping (make and timeout both forward one) is harmless.
        if not loop.is_closed():
            loop.call_soon_threadsafe(stopping.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    started = time.monotonic()
    await stopping.wait()
    log.info("shutting down after %.0fs", time.monotonic() - started)
    await mcp.close()
    await runner.cleanup()
