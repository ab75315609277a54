#!/usr/bin/env python3
"""Start the MCP server with the plugin's own Python environment (stdlib only, `python3 -S`).

Claude Code runs this from .mcp.json with a bare `python3`; the server itself
needs the `mcp` SDK, so this finds the environment the hooks use
(`$MEMORY_ANCHOR_PYTHON`, else `<data dir>/env/<version>/`) and execs the
server in it. On a first run the environment may still be building: start
the build if nobody has, wait a little, and otherwise exit with a message
(Claude Code shows the server as failed; it works from the next session on).
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from memory_anchor import paths  # noqa: E402
from memory_anchor.hookkit import launcher  # noqa: E402

# Claude Code gives an MCP server about 30 s to answer `initialize`.
FIRST_RUN_WAIT_SECONDS = 20.0
# Claude Code may not pass CLAUDE_PLUGIN_DATA to MCP servers; .mcp.json forwards it under this name.
PLUGIN_DATA_VAR = "MEMORY_ANCHOR_PLUGIN_DATA"


def data_dir() -> str:
    forwarded = os.environ.get(PLUGIN_DATA_VAR, "").strip()
    if forwarded and "${" not in forwarded and not os.environ.get("MEMORY_ANCHOR_DATA_DIR"):
        return forwarded
    return paths.data_dir_str()


def main() -> int:
    data = data_dir()
    found = launcher.worker_python(ROOT, data)
    if found is None:
        launcher.start_bootstrap(ROOT, data)
        deadline = time.monotonic() + FIRST_RUN_WAIT_SECONDS
        while found is None and time.monotonic() < deadline:
            time.sleep(0.5)
            found = launcher.worker_python(ROOT, data)
    if found is None:
        sys.stderr.write(
            "memory-anchor: installing its Python environment (first run; see "
            f"{paths.data_file(os.path.join(paths.LOGS, paths.BOOTSTRAP_LOG), data)}). "
            "The memory tools will be available in the next session.\n"
        )
        return 1
    python, extra = found
    env = dict(os.environ)
    env.update(extra)
    env["MEMORY_ANCHOR_DATA_DIR"] = data
    os.execve(python, [python, "-m", "mcp_server.server"], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
