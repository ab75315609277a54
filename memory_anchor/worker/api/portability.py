"""Export and import of the whole memory as JSON Lines (`memory-anchor export|import`)."""

from __future__ import annotations

import os
import tempfile

from aiohttp import web

from memory_anchor.schemas.portability import EXPORT_MEDIA_TYPE
from memory_anchor.worker.api.openapi import request_content
from memory_anchor.worker.store.portability import Exporter, Importer
from memory_anchor.worker.store.records import RecordError

routes = web.RouteTableDef()

UPLOAD_CHUNK = 1 << 16


@routes.get("/api/v1/export")
async def export_memory(request: web.Request) -> web.StreamResponse:
    """Every record version (with its seq), branch, snapshot, session and other memory table, as JSON Lines."""
    services = request.app["services"]
    _refuse_on_team_storage(services)
    chunks = Exporter(services.db.path).chunks()
    try:
        # The first chunk before the headers go out: a failure is still a JSON error.
        chunk = await services.run(next, chunks, None)
        response = web.StreamResponse(
            headers={
                "Content-Type": EXPORT_MEDIA_TYPE,
                "Content-Disposition": 'attachment; filename="memory-anchor-export.jsonl"',
            }
        )
        await response.prepare(request)
        while chunk is not None:
            await response.write(chunk)
            chunk = await services.run(next, chunks, None)
    finally:
        await services.run(chunks.close)  # ends the read transaction even if the client went away
    await response.write_eof()
    return response


@routes.post("/api/v1/import")
@request_content(
    EXPORT_MEDIA_TYPE, {"type": "string"},
    "An export as `GET /api/v1/export` writes it: one JSON object a line, the header first, then the rows, then "
    "the end line with the row count. A file that breaks the format is a 400 naming the line; a worker that "
    "already holds memory refuses any import with 409 `not_empty`, before it reads the file.",
)  # fmt: skip
async def import_memory(request: web.Request) -> web.Response:
    """Load an export (JSON Lines body) into this worker; 409 unless its memory is empty. All or nothing."""
    services = request.app["services"]
    _refuse_on_team_storage(services)
    # Spooled to a file rather than held in memory: an export can be larger
    # than the request size limit, and the import reads it line by line.
    handle = tempfile.NamedTemporaryFile(dir=services.data_dir, prefix=".import-", suffix=".jsonl", delete=False)
    try:
        with handle:
            async for chunk in request.content.iter_chunked(UPLOAD_CHUNK):
                handle.write(chunk)
        result = await services.run(Importer(services.db).import_file, handle.name)
    finally:
        os.unlink(handle.name)
    if services.pipeline is not None:
        services.pipeline.wake()  # the pipeline drains the vector queue the import filled
    return web.json_response(result.model_dump())


def _refuse_on_team_storage(services) -> None:
    """Export and import work on the data dir's own file; a team database is copied by its owner."""
    if services.shared_store:
        raise RecordError(
            "this worker's memory is the team database: the database owner copies it with "
            "`memory-anchor storage migrate --to FILE --from URL` (and a SQLite memory into it with `--to URL`)",
            code="team_storage",
            status=409,
        )
