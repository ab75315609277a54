"""The stdio bridge (memory_anchor/mcp/bridge.py) under faults, through the real `mcp` client.

The bridge is what .mcp.json starts: a stdlib process that relays JSON-RPC to
the worker's MCP endpoint. When the worker restarts, the session keeps
working; when no worker can be reached, or it stops answering, the model gets
an error for that request and the session goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import ROOT, start_worker, worker_env


def _text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _bridge(env: dict[str, str], **limits: float) -> StdioServerParameters:
    """The bridge as .mcp.json runs it (`python3 -S memory_anchor/mcp/server.py`), its waits shortened."""
    if not limits:
        return StdioServerParameters(command="python3", args=["-S", str(ROOT / "memory_anchor" / "mcp" / "server.py")],
                                     env=env, cwd=str(ROOT))  # fmt: skip
    settings = "; ".join(f"bridge.{name} = {value}" for name, value in limits.items())
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from memory_anchor.mcp import bridge; {settings}; sys.exit(bridge.main())"
    return StdioServerParameters(command="python3", args=["-S", "-c", code], env=env, cwd=str(ROOT))


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = worker_env(data_dir, CLAUDE_CODE_SESSION_ID="bridge-s1", CLAUDE_PROJECT_DIR=str(data_dir.parent))
    env.update(extra)
    return env


async def _open(client: ClientSession, protocol: str) -> None:
    """Open the session as a client of that protocol does: Claude Code 2.1.292+ probes
    `server/discover` (2026-07-28, stateless); older clients shake hands with `initialize`."""
    if protocol == MODERN:
        await client.discover()
    else:
        await client.initialize()
    assert client.protocol_version == protocol


MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"


@pytest.mark.parametrize("protocol", [HANDSHAKE, MODERN])
def test_the_session_survives_a_worker_restart(tmp_path, protocol):
    """The bridge reconnects after a restart, starting the worker itself as the hooks would;
    a handshake session has its `initialize` replayed, a 2026-07-28 one needs none."""
    data_dir = tmp_path / "data"
    first = start_worker(data_dir)
    env = _env(data_dir, MEMORY_ANCHOR_PYTHON=sys.executable)  # lets the bridge start a worker as the hooks would

    async def session():
        async with stdio_client(_bridge(env)) as (read, write):
            async with ClientSession(read, write) as client:
                await _open(client, protocol)
                await client.call_tool("memory_write_fact", {"fact_text": "The deploy script lives in ops/deploy.sh"})
                before = await client.call_tool("memory_search", {"query": "deploy script"})
                first.stop()  # the worker goes away between two calls
                after = await client.call_tool("memory_search", {"query": "deploy script"})
                tools = await client.list_tools()
                return before, after, tools

    before, after, tools = asyncio.run(session())
    try:
        assert not before.is_error and "ops/deploy.sh" in _text(before)
        assert not after.is_error and "ops/deploy.sh" in _text(after), _text(after)
        assert "memory_search" in {t.name for t in tools.tools}
        restarted = json.loads((data_dir / "worker.json").read_text())
        assert restarted["pid"] != first.process.pid
    finally:
        info = json.loads((data_dir / "worker.json").read_text())
        os.kill(info["pid"], 15)


def test_no_worker_means_a_clear_error_not_a_hang(tmp_path):
    """A worker that cannot start: `initialize` fails with the reason, within the bridge's bounded wait."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = _env(data_dir, MEMORY_ANCHOR_PYTHON="/bin/false")  # every start attempt exits at once

    async def session():
        async with stdio_client(_bridge(env, FIRST_CONNECT_WAIT=1.0)) as (read, write):
            async with ClientSession(read, write) as client:
                try:
                    await client.initialize()
                except Exception as exc:  # noqa: BLE001 - the McpError is the point
                    return exc
        return None

    error = asyncio.run(asyncio.wait_for(session(), 60))
    assert error is not None, "initialize succeeded without a worker"
    assert "Memory Anchor worker is not reachable" in str(error) and "worker.log" in str(error)


class SilentEndpoint:
    """A worker endpoint that welcomes the bridge and answers `initialize`, then never again."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.sock.accept()
        stream = conn.makefile("rwb")
        stream.readline()  # the hello
        stream.write(b'{"ok": true}\n')
        stream.flush()
        for line in stream:
            message = json.loads(line)
            if message.get("method") == "initialize":
                result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "silent", "version": "0"}}  # fmt: skip
                stream.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n")
                stream.flush()


def test_a_worker_that_stops_answering_gets_a_timeout_error(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    endpoint = SilentEndpoint()
    (data_dir / "worker.json").write_text(json.dumps({"pid": os.getpid(), "port": 9, "token": "t",
                                                      "host": "127.0.0.1", "mcp_port": endpoint.port}))  # fmt: skip

    async def session():
        async with stdio_client(_bridge(_env(data_dir), REQUEST_TIMEOUT=1.0)) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                try:
                    await client.call_tool("search", {"query": "x"})
                except Exception as exc:  # noqa: BLE001
                    return exc
        return None

    error = asyncio.run(asyncio.wait_for(session(), 60))
    assert error is not None and "did not answer within 1 s" in str(error)


def test_an_older_client_gets_its_own_protocol_version(tmp_path):
    """A client asking 2025-03-26 (raw JSON-RPC, as an older Claude Code) is answered in it, and lists and calls tools."""
    worker = start_worker(tmp_path / "data")
    try:
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_search", "arguments": {"query": "deploy"}}},
        ]  # fmt: skip
        bridge = _bridge(_env(worker.data_dir))
        process = subprocess.Popen([bridge.command, *bridge.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=bridge.env, cwd=bridge.cwd, text=True)  # fmt: skip
        answers = {}
        try:
            for message in lines:
                process.stdin.write(json.dumps(message) + "\n")
                process.stdin.flush()
                if "id" in message:  # the bridge's own waits are bounded, so readline returns
                    answer = json.loads(process.stdout.readline())
                    answers[answer["id"]] = answer
        finally:
            process.stdin.close()
            process.wait(timeout=30)
        assert answers[1]["result"]["protocolVersion"] == "2025-03-26"
        assert "memory_search" in {t["name"] for t in answers[2]["result"]["tools"]}
        assert answers[3]["result"]["isError"] is False
    finally:
        worker.stop()
