"""The MCP server offers the few tools a model needs, through the real `mcp` client over stdio
against a real worker: one way to ask memory, each tool saying when to use it."""

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
TOOLS = {"search", "timeline", "get_observations", "memory_write_fact", "forget_memory", "edit_memory", "record_user_answer"}


def _text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _session(env: dict[str, str], calls):
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_anchor.mcp.server"], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            return tools, [await session.call_tool(name, arguments) for name, arguments in calls]


def test_the_model_gets_one_way_to_ask_memory_and_each_hit_once_with_its_text(worker, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    from memory_anchor.core.projects import project_for_cwd

    key = project_for_cwd(str(project))
    said = "Deploys go through fly.io because the team already runs Postgres there"
    for n in range(3):  # the same thing stored three times: one hit, said 3 times
        worker.post("/api/v1/memories", {"content": said, "project": key, "infer": False, "metadata": {"n": n}})
    worker.post("/api/v1/memories", {"content": "The release checklist is in docs/release.md", "project": key, "infer": False})
    worker.wait_idle()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), CLAUDE_PROJECT_DIR=str(project), CLAUDE_CODE_SESSION_ID="mcp-s1",
               PYTHONPATH=str(ROOT))  # fmt: skip
    tools, (found,) = asyncio.run(_session(env, [("search", {"query": "why do we deploy on fly.io?"})]))

    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:  # each says when to reach for it, in its first lines
        assert "use" in tool.description.lower().split("\n\n")[0] + tool.description.lower(), tool.name
    text = _text(found)
    hits = [line for line in text.splitlines() if line.startswith("- ")]
    assert len([line for line in hits if "fly.io" in text]) >= 1
    first = text.split("\n- ")[0]
    assert "said 3 times" in text and text.count("because the team already runs Postgres") == 1
    assert "best first" in first
    scores = [float(line.rsplit("score ", 1)[1].split()[0]) for line in hits if "score " in line]
    assert scores == sorted(scores, reverse=True)


def test_a_session_hit_names_the_files_its_work_changed(worker, tmp_path):
    """"How did we fix X?" most often wants the files: a session's summary hit says which it changed,
    by the path the project names them, without fetching its details."""
    project = tmp_path / "shop"
    project.mkdir()
    session = "mcp-files-1"

    def hook(name: str, **fields) -> dict:
        return {"hook_event_name": name, "session_id": session, "cwd": str(project), **fields}

    edits = [hook("PostToolUse", tool_name="Edit", tool_use_id=f"t{n}",
                  tool_input={"file_path": str(project / path), "old_string": "rate = 0.2", "new_string": "rate = 0.25"},
                  tool_response={"filePath": str(project / path)})
             for n, path in enumerate(["app/tax.py", "app/cart.py", "app/vat.py", "app/invoice.py", "tests/test_tax.py"])]  # fmt: skip
    for payload in [hook("UserPromptSubmit", prompt="fix the wrong VAT rate on invoices for German customers"), *edits,
                    hook("Stop", stop_hook_active=False, last_assistant_message="Fixed the VAT rate: it is 0.25 now."),
                    hook("SessionEnd", reason="other")]:  # fmt: skip
        worker.post("/api/v1/events", payload, expect=202)
    worker.wait_idle()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), CLAUDE_PROJECT_DIR=str(project), CLAUDE_CODE_SESSION_ID="mcp-s2",
               PYTHONPATH=str(ROOT))  # fmt: skip
    _, (found,) = asyncio.run(_session(env, [("search", {"query": "how did we fix the VAT rate on invoices?", "kind": "summary"})]))

    text = _text(found)
    assert "  changed: app/tax.py, app/cart.py, app/vat.py, app/invoice.py (+1 more)" in text, text
    assert str(project) + "/app" not in text.split("changed:", 1)[1].splitlines()[0]
