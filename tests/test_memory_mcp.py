"""The memory model's MCP tools through the real `mcp` client over stdio, against a real worker."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.both_backends

ROOT = Path(__file__).resolve().parents[1]


def _text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _session_calls(env: dict[str, str], calls):
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_anchor.mcp.server"], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out = []
            for name, arguments in calls:
                out.append(await session.call_tool(name, arguments))
            return out


def test_memory_model_tools(worker, tmp_path):
    project = tmp_path / "proj"
    (project / ".ai" / "operations").mkdir(parents=True)
    (project / ".ai" / "operations" / "release_checklist.md").write_text("# Release checklist\nTag, build, publish to PyPI.\n")
    from memory_anchor.core.projects import project_for_cwd

    project_key = project_for_cwd(str(project))
    worker.post("/api/v1/identity", {"content": "Goal: memory for agents", "project": project_key, "confirmations": 3, "actor": "alice"}, expect=201)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), CLAUDE_PROJECT_DIR=str(project), CLAUDE_CODE_SESSION_ID="mcp-s1",
               PYTHONPATH=str(ROOT))
    results = asyncio.run(_session_calls(env, [
        ("get_constitution", {}),
        ("add_memory", {"content": "I rewrite the goal", "layer": "identity_schema"}),
        ("propose_constitution_change", {"content": "Constraint: keep it simple", "reason": "said twice by the user"}),
        ("log_event", {"content": "Fixed the flaky inbox test", "when": "2030-01-02T10:00:00Z", "where": "tests/test_inbox.py"}),
        ("search_events", {"start": "2030-01-01T00:00:00Z", "end": "2030-01-03T00:00:00Z"}),
        ("add_memory", {"content": "The inbox is a SQLite table", "layer": "verified_fact", "confidence": 0.95}),
        ("search_memory", {"query": "inbox"}),
        ("search_memory", {"query": "release checklist"}),
        ("set_active_context", {"key": "topic", "value": "inbox flakiness"}),
        ("get_active_context", {}),
        ("memory_write_relation", {"subject": "inbox", "relation": "stored_in", "object": "SQLite"}),
        ("memory_graph_query", {"entity": "SQLite", "depth": 1}),
    ]))
    texts = [_text(r) for r in results]
    assert texts[0] == "- Goal: memory for agents"
    assert results[1].is_error  # the identity layer is not a choice for add_memory
    assert "waits for a human" in texts[2]
    assert results[3].is_error is False and "logged" in texts[3]
    assert "Fixed the flaky inbox test" in texts[4]
    assert "active" in texts[5]
    assert "The inbox is a SQLite table" in texts[6]
    assert "release_checklist.md" in texts[7]
    assert "inbox flakiness" in texts[9]
    assert "inbox -stored_in-> SQLite" in texts[11]
    # the identity layer is unchanged: the proposal waits
    items = worker.get(f"/api/v1/identity?project={project_key}")["results"]
    assert [i["text"] for i in items] == ["Goal: memory for agents"]
    assert [a["kind"] for a in worker.get("/api/v1/approvals")["results"]] == ["identity_change"]
