"""`memory-anchor bench session` in its smallest form: it runs the real CLI both ways and prints every figure."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.e2e.harness import ROOT, ensure_claude_installed

pytestmark = pytest.mark.e2e


def test_bench_session_prints_medians_ratio_parts_hooks_and_bridge_rss():
    ensure_claude_installed()
    done = subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "bench", "session", "--runs", "1",
                           "--hook-runs", "1", "--parts"], cwd=ROOT, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"without plugin\s+median \d+\.\d\d s", out) and re.search(r"with plugin\s+median \d+\.\d\d s", out)
    assert re.search(r"empty plugin\s+median \d+\.\d\d s", out) and re.search(r"floor\s+[-+]\d+\.\d\d s", out)
    assert re.search(r"ratio\s+\d+\.\d\d", out)
    for part in ("hooks only", "idle hooks", "MCP only", "idle MCP"):
        assert re.search(rf"{part}\s+median \d+\.\d\d s\s+\([-+]\d+\.\d\d s over the empty plugin", out), out
    assert re.search(r"bridge RSS\s+\d+\.\d MB peak over [1-9]", out), out
    for hook in ("session_start", "user_prompt_submit", "post_tool_use", "stop", "session_end"):
        assert re.search(rf"{hook}\s+\d+ ms", out), out
    assert re.search(r"our share\s+[-+]\d+\.\d\d s over a same-shape idle plugin.*hooks [-+]\d+\.\d\d s, MCP server [-+]\d+\.\d\d s", out), out
    shares = out.split("each hook's own share")[1]
    for hook in ("session_start", "user_prompt_submit", "post_tool_use", "stop", "session_end"):
        assert re.search(rf"{hook}\s+[-+]\d+ ms\s+\(cat \d+ ms\)", shares), out
