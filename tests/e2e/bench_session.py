"""Wall time of a scripted Claude Code session with the plugin and without it (prints figures).

    .venv/bin/python -m tests.e2e.bench_session [--runs 5]

Same fake API, same one-prompt session (a Bash tool use, then an answer), a
fresh HOME per configuration; the plugin configuration is installed the
user's way and its worker is already running (the steady state).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tests.e2e.harness import RUN_MARKER, ClaudeHome, ScriptedModel, copy_plugin, ensure_claude_installed
from tests.fakes.anthropic_server import FakeAnthropicServer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ensure_claude_installed()
    marker = f"MARKER-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropicServer(responder=ScriptedModel(marker)) as fake:
        base = Path(tmp)
        plain = ClaudeHome(base / "plain", fake.base_url, developer_python=None)
        with_plugin = ClaudeHome(base / "plugin", fake.base_url, developer_python=sys.executable)
        with_plugin.install_plugin(copy_plugin(base / "clone"))
        with_plugin.run(RUN_MARKER)  # starts the worker (steady state afterwards)
        time.sleep(3)
        times: dict[str, list[float]] = {"without plugin": [], "with plugin": []}
        try:
            for _ in range(args.runs):
                for name, home in (("without plugin", plain), ("with plugin", with_plugin)):
                    started = time.perf_counter()
                    home.run(RUN_MARKER)
                    times[name].append(time.perf_counter() - started)
        finally:
            for info in (with_plugin.home / ".claude" / "plugins" / "data").glob("*/worker.json"):
                os.kill(json.loads(info.read_text())["pid"], 15)
        for name, values in times.items():
            print(f"{name:15} median {statistics.median(values):.2f} s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
        overhead = statistics.median(times["with plugin"]) - statistics.median(times["without plugin"])
        print(f"plugin overhead  {overhead:+.2f} s per session (6 hook runs + MCP server start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
