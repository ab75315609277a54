"""What the Claude Code hooks run: standard library only, cheap to import.

The executables in `hooks/` are one line each around `entry.main(<event>)`, started
by hooks/launch.sh (which picks the interpreter: `interpreter.py`).
Every module here is imported by a `python3 -S` process with a budget of a few
milliseconds, before any virtual environment exists, so none of them may import
anything slow at module level (json, socket, subprocess, pathlib, typing,
urllib, uuid): those are imported inside the functions of the slow paths.

- `wire.py`      worker.json and a raw-socket HTTP/1.1 exchange with the worker
- `jsonlite.py`  JSON through CPython's `_json` (the `json` package costs a hook more than its work)
- `spool.py`     append an undelivered event to spool.jsonl
- `launcher.py`  start the worker (or the environment bootstrap) in the background
- `bootstrap.py` build/upgrade the plugin's Python environment (a detached process)
- `pythons.py`   find a Python 3.10+ to build it with (the hooks' python3 may be 3.9)
- `status.py`    why memory is not working, in one line for the user and one for Claude
- `entry.py`     read stdin; events Claude Code does not wait for go on in a detached child
- `runner.py`    one hook invocation: deliver or spool, print context
- `interpreter.py` remember the Python behind a `python3` shim, for launch.sh
"""
