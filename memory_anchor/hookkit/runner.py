"""One hook invocation, whatever the event: deliver the payload, then do the event's extra.

Every event (its payload read from stdin by entry.py, which detaches the events
Claude Code does not wait for): POST it unchanged to the worker
(`/api/v1/events`, bearer token, event id, branch/agent headers); if the worker
cannot take it, append it to the spool and start the worker (or the build of
its environment) in the background.
SessionStart also prints the memory context, UserPromptSubmit the memories
relevant to the prompt, both as `hookSpecificOutput.additionalContext`.

Whatever happens the process exits 0 quickly and prints nothing but that
output: errors go to `<data dir>/logs/hooks.log`, never into the session.
"""

from __future__ import annotations

import os
import sys
import time

from memory_anchor.core import paths
from memory_anchor.hookkit import interpreter, jsonlite, spool, wire

# Seconds. A hook never waits longer than these for the worker (hooks.json's
# timeouts are a last resort, far above them).
EVENT_TIMEOUT = 2.0
CONTEXT_TIMEOUT = 3.0
RECALL_TIMEOUT = 1.5
# A fork's announcement: the worker first lets its parent's last events be processed
# (memory_anchor/worker/api/branches.py FORK_WAIT, 3 s at most, only when some are still pending).
FORK_TIMEOUT = 4.0
# How long SessionStart waits for a worker it has just started, when there is
# no cached context to print instead.
NEW_WORKER_WAIT = 5.0

BRANCH_ENV = "MEMORY_ANCHOR_BRANCH"
AGENT_ENV = "MEMORY_ANCHOR_AGENT_ID"
EVENT_ID_HEADER = "X-Memory-Anchor-Event-Id"
BRANCH_HEADER = "X-Memory-Anchor-Branch"
AGENT_HEADER = "X-Memory-Anchor-Agent"


def plugin_root() -> str:
    """The plugin's root directory: three levels above this file."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(data_dir: str, event: str, message: str) -> None:
    """Append one line to hooks.log; a hook that cannot even log stays silent."""
    try:
        logs = os.path.join(data_dir, paths.LOGS)
        os.makedirs(logs, 0o700, exist_ok=True)
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {event} pid={os.getpid()}: {message}\n"
        fd = os.open(os.path.join(logs, paths.HOOKS_LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


class Hook:
    """The state of one invocation."""

    def __init__(self, event: str, raw: bytes, data_dir: str):
        self.event = event
        self.raw = raw
        self.data_dir = data_dir
        self.event_id = wire.new_event_id()
        self.branch = os.environ.get(BRANCH_ENV, "").strip() or None
        self.agent_id = os.environ.get(AGENT_ENV, "").strip() or None
        self.info = wire.read_worker_info(paths.data_file(paths.WORKER_INFO, data_dir))
        self.worker_reachable = False
        self.bootstrap_started = False
        # The last failed build as it stood before this hook started another: what the session is told
        # describes how it began, not a race with the build this hook set off (`memory_notice`).
        self.failure_before: tuple[str, dict] | None = None
        self._payload: dict | None = None
        self.fork: str | None = None  # the session a 2.1.197 fork's SessionStart stands for (its payload is the parent's)

    @property
    def payload(self) -> dict:
        """The parsed payload, for the events that need fields of it (parsed once, on first use)."""
        if self._payload is None:
            try:
                parsed = jsonlite.loads(self.raw.decode("utf-8", "replace"))
            except ValueError:
                parsed = None
            self._payload = parsed if isinstance(parsed, dict) else {}
        return self._payload

    def send_event(self) -> wire.Pending | None:
        """Send the event without waiting for the answer; None when the worker cannot be reached."""
        if self.info is None:
            return None
        headers = {EVENT_ID_HEADER: self.event_id}
        if self.branch:
            headers[BRANCH_HEADER] = self.branch
        if self.agent_id:
            headers[AGENT_HEADER] = self.agent_id
        try:
            pending = wire.send(self.info, "POST", "/api/v1/events", self.raw, headers, EVENT_TIMEOUT)
        except OSError as exc:
            log(self.data_dir, self.event, f"worker unreachable: {exc!r}")
            return None
        self.worker_reachable = True
        return pending

    def finish_delivery(self, pending: wire.Pending | None) -> None:
        """Read the worker's answer to the event; if it did not take it, spool it (and get a worker going)."""
        status = None
        if pending is not None:
            try:
                status = pending.response(want_body=False).status
            except OSError as exc:
                log(self.data_dir, self.event, f"worker unreachable: {exc!r}")
        self.worker_reachable = status is not None
        if status is not None:
            if 200 <= status < 300:
                return
            if status == 400:
                # Malformed: the worker will never take it, so keeping it would only clog the spool.
                log(self.data_dir, self.event, f"worker refused the event (400): {self.refusal() or 'see worker.log'}; dropped")
                return
            log(self.data_dir, self.event, f"worker answered {status}; spooling the event")
        refusal = self.refusal()
        if refusal is not None:
            log(self.data_dir, self.event, f"{refusal}; dropped, not spooled")
            return
        dropped = spool.append(
            paths.data_file(paths.SPOOL, self.data_dir),
            spool.spool_entry(self.event_id, self.raw, self.event, self.branch, self.agent_id),
            spool.cap_bytes(self.data_dir),
        )
        if dropped:
            log(self.data_dir, self.event, f"the spool reached its cap ({spool.megabytes(spool.cap_bytes(self.data_dir))} MB): "
                f"dropped its {dropped} oldest events, kept the newest")  # fmt: skip
        if not self.worker_reachable:
            from memory_anchor.hookkit import launcher, status

            self.failure_before = status.read_failure(self.data_dir)
            # A new session retries a failed build at once: the user may just have fixed its cause.
            new_session = self.event == "SessionStart" and self.payload.get("source") in (None, "startup", "resume", "fork")
            done = launcher.ensure_worker(plugin_root(), self.data_dir, retry_now=new_session)
            self.bootstrap_started = done == launcher.BOOTSTRAP_STARTED
            log(self.data_dir, self.event, done)

    def link_fork(self) -> str | None:
        """If this SessionStart opens a fork, tell the worker whose (before the fork's first event
        reaches it) and return the fork's session id; None otherwise (hookkit/forks.py).

        A worker that cannot be told now learns it from the event itself: its payload then
        names the fork and its parent (`forks.carrying_link`), so the spool keeps the link
        with the event and the fork gets its branch when the worker takes it.
        """
        from memory_anchor.hookkit import forks

        link = forks.fork_of(self.payload, os.environ)
        if link is None:
            return None
        fork, parent = link
        body = jsonlite.dumps({"parent_session_id": parent}, ascii_only=True).encode("utf-8")
        told = self.info is not None and self.get_json(
            "POST", f"/api/v1/sessions/{wire.quote(fork)}/fork", body, FORK_TIMEOUT
        ) is not None
        if not told:
            log(self.data_dir, self.event, f"session {fork} is a fork of {parent}; the worker was not told, "
                "the event carries it")  # fmt: skip
            self.raw = jsonlite.dumps(forks.carrying_link(self.payload, fork, parent), ascii_only=True).encode("utf-8")
        return fork

    def refusal(self) -> str | None:
        """Why the worker would refuse this payload (the same checks as its wire models), or None."""
        from memory_anchor.hookkit import fields

        return fields.refusal({"hook_event_name": self.event, **self.payload}) if self.payload else None

    def get_json(self, method: str, target: str, body: bytes, timeout: float) -> dict | None:
        """A JSON object from the worker, or None (unreachable, error status, bad body)."""
        if self.info is None:
            return None
        try:
            response = wire.send(self.info, method, target, body, timeout=timeout).response()
        except OSError as exc:
            log(self.data_dir, self.event, f"{method} {target.split('?')[0]} failed: {exc!r}")
            return None
        if response.status != 200:
            log(self.data_dir, self.event, f"{method} {target.split('?')[0]} answered {response.status}")
            return None
        try:
            data = jsonlite.loads(response.body.decode("utf-8", "replace"))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def project(self) -> str:
        from memory_anchor.core.projects import project_for_cwd

        cwd = self.payload.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        return project_for_cwd(str(cwd), self.info.project_names if self.info else "path")


def emit_context(event: str, context: str, user_message: str | None = None) -> None:
    """Print the hook's JSON output: context for Claude, and optionally one line for the user."""
    output: dict = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    if user_message:
        output["systemMessage"] = user_message
    # ASCII: valid JSON whatever the locale's encoding or a lone surrogate in the context (2.1.248
    # counts stdout that opens with "{" and does not parse as a hook error).
    sys.stdout.write(jsonlite.dumps(output, ascii_only=True) + "\n")
    sys.stdout.flush()


def memory_notice(hook: Hook, root: str) -> tuple[str, str] | None:
    """(line for the user, line for Claude) when memory is not working, else None.

    Also the one-time notice, once the worker is back, that the spool had to drop events.
    """
    from memory_anchor.hookkit import launcher, status

    problem = status.current_problem(
        root, hook.data_dir, version=launcher.plugin_version(root),
        environment_ready=launcher.worker_python(root, hook.data_dir) is not None,
        worker_reachable=hook.worker_reachable,
        building=hook.bootstrap_started or launcher.bootstrap_running(hook.data_dir),
        failure=hook.failure_before if hook.bootstrap_started else status.read_failure(hook.data_dir),
    )  # fmt: skip
    if problem is not None:
        return problem.user, problem.claude
    dropped = status.spool_note(hook.data_dir)
    if dropped and hook.worker_reachable:
        try:
            os.remove(paths.data_file(spool.DROPPED_MARKER, hook.data_dir))
        except OSError:
            pass
        return f"Memory Anchor is back on{dropped} while it was off.", ""
    return None


def session_start(hook: Hook) -> None:
    """Print the memory context: from the worker, else the last one it cached for this project."""
    from memory_anchor.hookkit import launcher
    from memory_anchor.core.projects import context_cache_path

    root = plugin_root()
    if hook.worker_reachable and launcher.upgrade_if_needed(root, hook.data_dir, hook.info):
        log(hook.data_dir, hook.event, "plugin updated: building its environment in the background")

    project = hook.project()
    target = (
        f"/api/v1/context?project={wire.quote(project)}"
        f"&source={wire.quote(str(hook.payload.get('source') or 'startup'))}"
        f"&session_id={wire.quote(str(hook.fork or hook.payload.get('session_id') or ''))}"
        + (f"&branch={wire.quote(hook.branch)}" if hook.branch else "")
        # Its folder holds the project's earlier transcripts: the worker offers to import those it never saw.
        + (f"&transcript_path={wire.quote(hook.payload['transcript_path'])}"
           if isinstance(hook.payload.get("transcript_path"), str) else "")  # fmt: skip
    )
    context = None
    offer = None  # the worker's one line for the user (N earlier sessions can be imported)
    if hook.worker_reachable:
        data = hook.get_json("GET", target, b"", CONTEXT_TIMEOUT)
        context = data.get("context") if data else None
        offer = data.get("notice") if data and isinstance(data.get("notice"), str) else None
    answered = isinstance(context, str)
    if not answered:  # the unusual case: only now is the cache's path worth its imports
        cache = str(context_cache_path(hook.data_dir, project))
        if not hook.worker_reachable and not os.path.exists(cache) and launcher.worker_python(root, hook.data_dir) is not None:
            # We just asked for a worker and have nothing cached: give it a moment.
            deadline = time.monotonic() + NEW_WORKER_WAIT
            while context is None and time.monotonic() < deadline:
                if launcher.started_worker_failed():  # it crashed, or cannot run: nothing to wait for
                    break
                time.sleep(0.1)
                hook.info = wire.read_worker_info(paths.data_file(paths.WORKER_INFO, hook.data_dir))
                data = hook.get_json("GET", target, b"", max(0.1, deadline - time.monotonic()))
                context = data.get("context") if data else None
                hook.worker_reachable = data is not None
        if not isinstance(context, str):
            try:
                with open(cache, encoding="utf-8") as handle:
                    context = handle.read()
            except OSError:
                context = None
    # A worker that answered leaves one thing to tell: that the spool overflowed while it was away.
    if answered and not os.path.exists(paths.data_file(spool.DROPPED_MARKER, hook.data_dir)):
        notice = None
    else:
        notice = memory_notice(hook, root)
    if notice is not None:
        log(hook.data_dir, hook.event, f"told the user: {notice[0]}")
        context = "\n\n".join(part for part in (context if isinstance(context, str) else "", notice[1]) if part.strip())
        emit_context("SessionStart", context, notice[0])
    elif context and context.strip():
        emit_context("SessionStart", context, offer)


def user_prompt_submit(hook: Hook) -> None:
    """Add the few memories relevant to this prompt; silent when none match, or when no
    person asked it (a background agent's notification, a wake-up: origin.py)."""
    from memory_anchor.hookkit import origin

    if not hook.worker_reachable:
        return
    prompt = hook.payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return
    if not origin.typed_by_person(hook.payload.get("source"), prompt):
        return
    body = jsonlite.dumps(
        {
            "prompt": prompt,
            "project": hook.project(),
            "session_id": hook.payload.get("session_id"),
            "cwd": hook.payload.get("cwd"),
        },
        ascii_only=True,
    ).encode("utf-8")
    data = hook.get_json("POST", "/api/v1/recall", body, RECALL_TIMEOUT)
    context = data.get("context") if data else None
    if isinstance(context, str) and context.strip():
        emit_context("UserPromptSubmit", context)


EXTRAS = {"SessionStart": session_start, "UserPromptSubmit": user_prompt_submit}


def overlaps(event: str, hook: Hook) -> bool:
    """Whether the event's extra may run while the worker is still taking the event.

    Not for a resumed or forked session: a fork's branch is only known once the
    worker has processed this SessionStart, so the context waits for it.
    """
    return event != "SessionStart" or hook.payload.get("source") not in ("resume", "fork")


def run(event: str, raw: bytes) -> None:
    """Deliver the event read from stdin (entry.py), then do its extra; returns normally whatever happens."""
    data_dir = ""
    try:
        data_dir = paths.data_dir_str()
        hook = Hook(event, raw, data_dir)
        extra = EXTRAS.get(event)
        if event == "SessionStart":
            hook.fork = hook.link_fork()
        pending = hook.send_event()
        if pending is not None and extra is not None and overlaps(event, hook):
            try:  # ask for the context while the worker takes the event: two round trips at once
                extra(hook)
            finally:
                hook.finish_delivery(pending)
        else:
            hook.finish_delivery(pending)  # an unreachable worker is started before `extra` waits for it
            if extra is not None:
                extra(hook)
        interpreter.remember()
    except BaseException:  # noqa: BLE001 - a hook must never surface an error in the session
        try:
            import traceback

            log(data_dir or paths.data_dir_str(), event, "error:\n" + traceback.format_exc())
        except BaseException:  # noqa: BLE001
            pass
