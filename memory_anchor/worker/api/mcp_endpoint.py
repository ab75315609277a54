"""The worker's MCP endpoint: a loopback stream per Claude Code session, served by the `mcp` SDK.

Each session's `.mcp.json` server is a stdlib bridge (memory_anchor/mcp/bridge.py)
that connects here, proves it read worker.json (the bearer token in its
hello line, memory_anchor/schemas/mcp.py), and then relays the session's
JSON-RPC both ways. One worker serves every session, so a session pays for
a small bridge process, not a Python process with the SDK loaded.

The SDK and the tools are imported when the first bridge connects, not at
start: a worker that only takes hook events never loads them.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from pathlib import Path

from pydantic import ValidationError

from memory_anchor.schemas.mcp import BRIDGE_PROTOCOL, BridgeHello, BridgeWelcome
from memory_anchor.core import lifecycle

log = logging.getLogger(__name__)

# A bridge that connects must say hello at once; a stray client is dropped.
HELLO_TIMEOUT = 5.0
# One JSON-RPC message per line; a tool's arguments can be long, never this long.
MAX_LINE_BYTES = 16 * 1024 * 1024


class McpEndpoint:
    """The listening socket and the sessions being served on it."""

    def __init__(self, data_dir: Path, token: str):
        self.data_dir = data_dir
        self.token = token
        self.server: asyncio.base_events.Server | None = None
        self.sessions: set[asyncio.Task] = set()
        self._serve = None  # memory_anchor.mcp.endpoint.serve, once imported
        self._loading = asyncio.Lock()

    async def start(self, host: str) -> int:
        """Listen on a free loopback port; returns it (worker.json advertises it as `mcp_port`)."""
        sock = lifecycle.bind_socket(host, 0)
        self.server = await asyncio.start_server(self._accept, sock=sock, limit=MAX_LINE_BYTES)
        return sock.getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.sessions):
            task.cancel()
        if self.sessions:
            await asyncio.wait(self.sessions, timeout=5)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.sessions.add(task)
        try:
            await self._session(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the bridge went away (its Claude Code session ended)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("MCP session failed")
        finally:
            self.sessions.discard(task)
            writer.close()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT)
            hello = BridgeHello.model_validate_json(line)
        except (asyncio.TimeoutError, ValidationError, ValueError):
            await self._answer(writer, BridgeWelcome(ok=False, error="expected a Memory Anchor bridge hello"))
            return
        if not hmac.compare_digest(hello.token.encode(), self.token.encode()):
            await self._answer(writer, BridgeWelcome(ok=False, error="wrong token (worker.json changed; reconnect)"))
            return
        if hello.protocol != BRIDGE_PROTOCOL:
            await self._answer(writer, BridgeWelcome(ok=False, error=f"bridge protocol {hello.protocol} is not "
                                                     f"{BRIDGE_PROTOCOL}: restart Claude Code after the update"))  # fmt: skip
            return
        # Welcome before loading the SDK: the bridge's first messages wait in the stream meanwhile.
        await self._answer(writer, BridgeWelcome(ok=True))
        serve = await self._server()
        from memory_anchor.mcp.worker_gateway import SessionContext

        await serve(reader, writer, SessionContext(**hello.model_dump(exclude={"protocol", "token"})))

    async def _server(self):
        """memory_anchor.mcp.endpoint.serve, imported (once) off the event loop: the SDK takes about a second."""
        async with self._loading:
            if self._serve is None:

                def load():
                    from memory_anchor.mcp import endpoint, worker_gateway

                    worker_gateway.configure(self.data_dir)
                    return endpoint.serve

                self._serve = await asyncio.to_thread(load)
                log.info("MCP server loaded")
        return self._serve

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, welcome: BridgeWelcome) -> None:
        writer.write(welcome.model_dump_json(exclude_none=True).encode("utf-8") + b"\n")
        await writer.drain()
