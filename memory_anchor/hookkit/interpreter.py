"""The Python the hooks start with: remembered, so that a version manager's shim is paid once.

hooks/launch.sh, which every hooks.json command sources and .mcp.json runs, starts
the interpreter named in `<plugin data>/hook-python` when that file names one, else
`python3` from PATH, and says which in MEMORY_ANCHOR_HOOK_PYTHON. On many machines
`python3` on PATH is a shim: pyenv's and asdf's are shell scripts that find the
version to run (pyenv's costs 94 ms here before Python starts, against 11 ms for the
interpreter it then runs), and a Mac's /usr/bin/python3 finds the Command Line Tools'
one. Every hook, one per tool use, would pay that. So when launch.sh had to start
`python3`, the hook writes down the interpreter that actually runs it, and the next
hooks start that one directly. Any Python the hooks run on will do for them
(standard library only); if it goes away, launch.sh starts `python3` again and the
next hook writes down the new one.
"""

from __future__ import annotations

import os
import sys

FILE = "hook-python"
# launch.sh's word for "started python3 from PATH"; anything else is the remembered path.
FROM_PATH = "python3"
LAUNCHED_ENV = "MEMORY_ANCHOR_HOOK_PYTHON"


def remember() -> None:
    """Write down this interpreter for the next hooks, when launch.sh had to start `python3` from PATH."""
    if os.environ.get(LAUNCHED_ENV) != FROM_PATH:
        return  # not started by launch.sh (tests, a developer), or already remembered
    plugin_data = os.environ.get("CLAUDE_PLUGIN_DATA", "").strip()
    if not plugin_data or not sys.executable:
        return
    target = os.path.realpath(sys.executable)
    if "\n" in target or not os.access(target, os.X_OK):
        return
    path = os.path.join(plugin_data, FILE)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(plugin_data, exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(target + "\n")
        os.replace(temporary, path)  # a hook reading it meanwhile sees the old file or the new one
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass
