#!/usr/bin/env python3
"""Every Claude Code hook of the plugin: `hook.py <event>`, the event's payload on stdin.

Standard library only, run with `-S` by hooks/launch.sh (hooks.json names the event); the work
is in memory_anchor/hookkit/entry.py and runner.py. Always exits 0, never prints a traceback:
a broken plugin copy, or a python3 too old for the kit, must not break the user's session.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENT = sys.argv[1] if len(sys.argv) > 1 else ""
try:
    from memory_anchor.hookkit.entry import main
except BaseException:
    if EVENT == "SessionStart":  # the one hook whose output the user sees: say memory is off, and how to find why
        import json  # stdout that opens with "{" must be valid JSON (Claude Code 2.1.248+), whatever the path holds

        print(json.dumps({"systemMessage": "Memory Anchor is off: its hooks cannot run with this python3 (%s); run: "
                          "python3 %s/memory_anchor/hookkit/doctor.py" % (sys.version.split()[0], sys.path[0].replace("\\", "/"))}))
    sys.exit(0)
main(EVENT)
