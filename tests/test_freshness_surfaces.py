"""The code check on every surface that returns memories (issue 27 item 4): the REST API's records
carry their `freshness`, and the MCP `search` / `get_observations` results show the mark, so
Claude sees it when it searches. A real git repository, a real worker fed through the hook-event
door, the real `mcp` client over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from urllib.parse import quote

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memory_anchor.bench.gitrepo import GitRepo
from tests.conftest import ROOT

pytestmark = pytest.mark.both_backends


def _read(worker, root: str, session: str, path: str, content: str, n: int) -> None:
    full = f"{root}/{path}"
    worker.post("/api/v1/events", {
        "session_id": session, "transcript_path": f"/tmp/.claude/projects/x/{session}.jsonl", "cwd": root,
        "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": f"toolu_{session}_{n}",
        "tool_input": {"file_path": full},
        "tool_response": {"type": "text", "file": {"filePath": full, "content": content, "startLine": 1,
                                                    "numLines": content.count("\n"), "totalLines": content.count("\n")}},
    }, expect=202)  # fmt: skip


async def _mcp(env: dict[str, str], calls):
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_anchor.mcp.server"], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return ["\n".join(getattr(b, "text", "") for b in (await session.call_tool(name, args)).content)
                    for name, args in calls]  # fmt: skip


def test_records_about_code_carry_their_freshness_to_rest_and_mcp(worker, tmp_path):
    repo = GitRepo(tmp_path / "shop")
    files = {"config/settings.toml": "tax_rate = 0.2\n", "README.md": "# Shop\nRun make.\n"}
    repo.commit("Start", files=files)
    root = str(repo.root.resolve())
    for n, (path, content) in enumerate(files.items()):
        _read(worker, root, "s-surfaces", path, content, n)
    worker.wait_idle()
    repo.commit("Settings move into pyproject", files={"config/settings.toml": None})

    observations = worker.get(f"/api/v1/observations?project={quote(root)}")["results"]
    by_file = {("settings" if "settings.toml" in o["title"] else "readme"): o for o in observations}
    assert by_file["settings"]["freshness"] == {"state": "deleted", "path": "config/settings.toml", "new_path": None,
                                                "commits": 1, "detail": "config/settings.toml deleted since"}  # fmt: skip
    assert by_file["readme"]["freshness"]["state"] == "fresh"
    one = worker.get(f"/api/v1/memories/{by_file['settings']['id']}")
    assert one["freshness"]["state"] == "deleted"

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), CLAUDE_PROJECT_DIR=root, PYTHONPATH=str(ROOT))
    found, detail = asyncio.run(_mcp(env, [
        ("search", {"query": "settings.toml README", "mode": "keyword", "kind": "observation"}),
        ("get_observations", {"ids": [by_file["settings"]["id"]]}),
    ]))  # fmt: skip
    settings_line = next(line for line in found.splitlines() if by_file["settings"]["id"] in line)
    readme_line = next(line for line in found.splitlines() if by_file["readme"]["id"] in line)
    assert settings_line.endswith("| STALE (deleted): config/settings.toml deleted since")
    assert "STALE" not in readme_line
    assert "code: deleted: config/settings.toml deleted since" in detail
