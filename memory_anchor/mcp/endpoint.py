"""The MCP server as the worker runs it: every tool area, served over one bridge connection.

Layout, FastMCP style: `app.py` holds the one `mcp` instance; each module in
`tools/` is an area whose typed, docstring-described functions register
themselves with `@mcp.tool()` when the module is imported; every tool talks to
the worker's REST API through `worker_gateway.call()` (never to the stores).

The worker (memory_anchor/worker/api/mcp_endpoint.py) accepts a bridge's loopback connection,
checks its hello, and hands the stream to `serve()`: newline-delimited
JSON-RPC in both directions, as on stdio, into the SDK's own server session.
Importing this module loads the `mcp` SDK, so the worker does it only when
the first bridge connects.

Adding an area (only for what a model needs in every session: each tool's description costs
context tokens in every session):
  1. write `memory_anchor/mcp/tools/<area>.py`:
         from memory_anchor.mcp.app import mcp
         from memory_anchor.mcp.worker_gateway import call
         @mcp.tool(structured_output=False)  # text for the model; drop for JSON results
         def my_tool(arg: str) -> str:
             \"\"\"When the model should use it (the docstring is its description).\"\"\"
             return call("GET", "/api/v1/...", arg=arg)
  2. add ONE import line below. That is all.
"""

from __future__ import annotations

import asyncio

import anyio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from memory_anchor.mcp.app import mcp
# The few tools a model needs, each costing context tokens in every session: one way to ask
# memory (search, then timeline and get_observations), one way to write a lasting fact, and the
# user's corrections. Branches, snapshots, identity, the event log, active context and the graph
# are for people and orchestrators: the CLI and the REST API serve them.
from memory_anchor.mcp.tools import search  # noqa: F401  progressive disclosure: search, timeline, get_observations
from memory_anchor.mcp.tools import memories  # noqa: F401  memory_write_fact
from memory_anchor.mcp.tools import corrections  # noqa: F401  forget_memory, edit_memory, record_user_answer
from memory_anchor.mcp.worker_gateway import SessionContext, enter_session


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: SessionContext) -> None:
    """Run one MCP session over a connected stream until the bridge hangs up.

    The same framing as the SDK's stdio transport: one JSON-RPC message per line.
    """
    enter_session(session)  # before any task starts, so every handler inherits it
    server = mcp._lowlevel_server
    incoming_writer, incoming = create_context_streams[SessionMessage | Exception](0)
    outgoing, outgoing_reader = create_context_streams[SessionMessage](0)

    async def read_lines() -> None:
        async with incoming_writer:
            while line := await reader.readline():
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # the SDK answers a malformed message itself
                    await incoming_writer.send(exc)
                    continue
                await incoming_writer.send(SessionMessage(message))

    async def write_lines() -> None:
        async with outgoing_reader:
            async for session_message in outgoing_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(data.encode("utf-8") + b"\n")
                await writer.drain()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_lines)
        await server.run(incoming, outgoing, server.create_initialization_options())
        tasks.cancel_scope.cancel()
