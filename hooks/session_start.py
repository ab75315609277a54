#!/usr/bin/env python3
"""Claude Code SessionStart hook: prints the memory context (worker, else the cached one).

Standard library only, run with `-S` by hooks/launch.sh (see hooks.json); the work is in
memory_anchor/hookkit/entry.py and runner.py. Always exits 0, never prints a traceback.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    from memory_anchor.hookkit.entry import main
except BaseException:  # a broken plugin copy (or a too old python3) must not break the session
    import json  # stdout that opens with "{" must be valid JSON (Claude Code 2.1.248+), whatever the path holds

    print(json.dumps({"systemMessage": "Memory Anchor is off: its hooks cannot run with this python3 (%s); run: python3 "
                      "%s/memory_anchor/hookkit/doctor.py" % (sys.version.split()[0], sys.path[0].replace("\\", "/"))}))
    sys.exit(0)
main("SessionStart")
