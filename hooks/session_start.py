#!/usr/bin/env python3
"""Claude Code SessionStart hook: prints the memory context (worker, else the cached one).

Standard library only, run as `python3 -S` (see hooks.json); the work is in
memory_anchor/hookkit/runner.py. Always exits 0, never prints a traceback.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    from memory_anchor.hookkit.runner import main
except BaseException:  # a broken plugin copy must not break the user's session
    sys.exit(0)
main("SessionStart")
