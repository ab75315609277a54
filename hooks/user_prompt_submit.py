#!/usr/bin/env python3
"""Claude Code UserPromptSubmit hook: records the prompt and adds the memories relevant to it.

Standard library only, run with `-S` by hooks/launch.sh (see hooks.json); the work is in
memory_anchor/hookkit/entry.py and runner.py. Always exits 0, never prints a traceback.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    from memory_anchor.hookkit.entry import main
except BaseException:  # a broken plugin copy must not break the user's session
    sys.exit(0)
main("UserPromptSubmit")
