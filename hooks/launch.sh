# Starts one of the plugin's standard-library scripts with `python -S`: every hook
# (hooks.json sources this file after setting `hook_event` and `script`, so it costs no
# process of its own) and the MCP bridge (.mcp.json runs `sh launch.sh memory_anchor/mcp/server.py`).
#
# The interpreter is the one named in $CLAUDE_PLUGIN_DATA/hook-python, else `python3`
# from PATH. A `python3` on PATH is often a version manager's shim (pyenv, asdf: a
# shell script that costs tens of milliseconds before Python starts, on every hook);
# a hook started through it writes down the interpreter it really runs on
# (memory_anchor/hookkit/interpreter.py) and the next ones start that directly.
script=${script:-$1}
python=
read -r python 2>/dev/null < "$CLAUDE_PLUGIN_DATA/hook-python"
[ -x "$python" ] || python=python3
MEMORY_ANCHOR_HOOK_PYTHON=$python exec "$python" -S "$CLAUDE_PLUGIN_ROOT/$script" ${hook_event:+"$hook_event"}
