"""Why memory is not working right now, in one line for the user and one for Claude.

SessionStart shows the user line (Claude Code's `systemMessage`) and adds the
Claude line to the context, so a user is never left believing memory is on
when the environment is still being built, its build failed, or the worker
does not come up. Only SessionStart says it: once per session, not per prompt.

The bootstrap records a failure in `bootstrap.failed`: the plugin version on
the first line, then one JSON object `{"problem", "fix", "detail"}`.
Standard library only, imported lazily by the hooks' slow paths.
"""

from __future__ import annotations

import os
import time

from memory_anchor.core import paths
from memory_anchor.hookkit.spool import DROPPED_MARKER

FAILED_MARKER = "bootstrap.failed"
WORKER_START_MARKER = "worker-start.attempt"
# A worker that has not answered this long after it was first asked to start failed.
WORKER_START_GRACE_SECONDS = 60.0
KEPT = "events are kept"


class Problem:
    __slots__ = ("user", "claude")

    def __init__(self, user: str, claude: str):
        self.user = user
        self.claude = claude


def doctor_command(plugin_root: str) -> str:
    return f"python3 {os.path.join(plugin_root, 'memory_anchor', 'hookkit', 'doctor.py')}"


def record_failure(data_dir: str, version: str, problem: str, fix: str, detail: str) -> None:
    import json

    with open(paths.data_file(FAILED_MARKER, data_dir), "w", encoding="utf-8") as handle:
        handle.write(version + "\n" + json.dumps({"problem": problem, "fix": fix, "detail": detail[-2000:]}) + "\n")


def read_failure(data_dir: str) -> tuple[str, dict] | None:
    """(version, {"problem", "fix", "detail"}) of the last failed build, or None."""
    import json

    try:
        with open(paths.data_file(FAILED_MARKER, data_dir), encoding="utf-8") as handle:
            version = handle.readline().strip()
            rest = handle.read()
    except OSError:
        return None
    try:
        record = json.loads(rest)
        if not isinstance(record, dict):
            raise ValueError("not an object")
    except ValueError:  # written by an older version: the repr of the exception
        record = {"problem": "building its environment failed", "fix": "", "detail": rest.strip()}
    return version, record


def note_worker_start(data_dir: str) -> None:
    """Remember when the worker was first asked to start since it last wrote worker.json."""
    marker = paths.data_file(WORKER_START_MARKER, data_dir)
    first = _first_start_attempt(data_dir)
    now = time.time()
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write(f"{first if first is not None else now:.3f}\n")
    os.utime(marker, None)


def _first_start_attempt(data_dir: str) -> float | None:
    """When the current run of unanswered start attempts began (None: the worker came up since)."""
    try:
        with open(paths.data_file(WORKER_START_MARKER, data_dir), encoding="utf-8") as handle:
            first = float(handle.readline().strip() or "nan")
    except (OSError, ValueError):
        return None
    if first != first:  # NaN: an older marker without a time
        return None
    try:
        if os.stat(paths.data_file(paths.WORKER_INFO, data_dir)).st_mtime >= first:
            return None
    except OSError:
        pass
    return first


def worker_start_failing(data_dir: str) -> bool:
    first = _first_start_attempt(data_dir)
    return first is not None and time.time() - first > WORKER_START_GRACE_SECONDS


def spool_note(data_dir: str) -> str:
    """', N oldest events were dropped (spool cap M MB)' when the spool was trimmed, else ''."""
    try:
        with open(paths.data_file(DROPPED_MARKER, data_dir), encoding="utf-8") as handle:
            dropped, cap_mb = handle.readline().split()[:2]
        return f"; the spool reached its {cap_mb} MB cap and its {int(dropped)} oldest events were dropped"
    except (OSError, ValueError):
        return ""


def current_problem(
    plugin_root: str, data_dir: str, *, version: str, environment_ready: bool, worker_reachable: bool, building: bool,
    failure: tuple[str, dict] | None,
) -> Problem | None:
    """What to tell the user at SessionStart, or None when memory works.

    `version` is the plugin's, `environment_ready` whether its Python environment is
    built (the launcher knows both; this module only reads and writes the records);
    `failure` the last failed build that counts (`read_failure`'s answer, read by the caller).
    """
    if worker_reachable:
        return None
    doctor = doctor_command(plugin_root)
    dropped = spool_note(data_dir)
    if failure is not None and failure[0] == version and not environment_ready:
        # The last build's reason, even while a retry runs: the user may not have fixed it yet.
        problem, fix = failure[1].get("problem") or "setting up failed", failure[1].get("fix") or ""
        fix_text = f" ({fix})" if fix else ""
        retrying = "; trying again now" if building else ""
        return Problem(
            f"Memory Anchor is off: {problem}{fix_text}; {KEPT}{dropped}{retrying}. Details: {doctor}",
            f"Memory Anchor (long-term memory) is off: {problem}. The user can fix it with: "
            f"{fix or doctor}. Events are kept and will be remembered once it works.",
        )
    if building:
        return Problem(
            f"Memory Anchor is setting up its Python environment (first run, a few minutes); "
            f"{KEPT} and will be remembered{dropped}.",
            "Memory Anchor (long-term memory) is installing itself in the background: nothing is "
            "remembered from earlier sessions yet; this session's events are kept and ingested once it is ready.",
        )
    if environment_ready and worker_start_failing(data_dir):
        log = paths.data_file(os.path.join(paths.LOGS, "worker.stderr.log"), data_dir)
        return Problem(
            f"Memory Anchor is off: its worker does not start (see {log}); {KEPT}{dropped}. Details: {doctor}",
            f"Memory Anchor (long-term memory) is off: its worker does not start. "
            f"The user can find why with: {doctor}. Events are kept.",
        )
    return None
