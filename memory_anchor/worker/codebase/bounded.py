"""Reading a repository within a time limit, on a thread the caller can walk away from.

The readers in git.py never wait on a FIFO nor read past a size, but a file on a hung
network mount blocks `open` or `stat` itself, in the kernel, where nothing interrupts
it. So the worker reads repositories on threads of their own: the caller (the pipeline's
drain, a briefing, `verify`) waits at most `timeout` and goes on with "unknown". A
thread still stuck is left behind (a daemon: it never holds up the worker's exit), and
the place it is stuck in answers "unknown" at once until that thread comes back, so one
hung repository costs one timeout, not one per event, and every other project flows.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable, Hashable

log = logging.getLogger(__name__)

# Reading a repository's few files takes milliseconds; hashing a changed file of MAX_FILE_BYTES a
# few tens. Ten seconds is a mount that does not answer, on a machine however loaded.
READ_TIMEOUT = 10.0
# Threads left stuck at once, beyond which every read answers "unknown" without trying.
MAX_STUCK = 8


class _Job:
    __slots__ = ("fn", "args", "key", "done", "result", "error", "abandoned")

    def __init__(self, fn: Callable[..., Any], args: tuple, key: Hashable):
        self.fn, self.args, self.key = fn, args, key
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.abandoned = False


class Bounded:
    """Runs reads on a few reusable daemon threads, each call bounded by `timeout`."""

    def __init__(self, timeout: float = READ_TIMEOUT, max_stuck: int = MAX_STUCK):
        self.timeout = timeout
        self.max_stuck = max_stuck
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue] = []
        self._stuck: dict[Hashable, int] = {}  # key -> threads stuck on it
        self.timeouts = 0  # reads given up on: the tests and the log read it

    def stuck(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._stuck or sum(self._stuck.values()) >= self.max_stuck

    def run(self, key: Hashable, fn: Callable[..., Any], *args: Any, default: Any = None) -> Any:
        """`fn(*args)`, or `default` when it takes longer than the timeout, or when an earlier read
        of `key` is still stuck. What `fn` raises is raised here."""
        with self._lock:
            if key in self._stuck or sum(self._stuck.values()) >= self.max_stuck:
                return default
            inbox = self._idle.pop() if self._idle else self._start()
        job = _Job(fn, args, key)
        inbox.put(job)
        if not job.done.wait(self.timeout):
            with self._lock:
                if not job.done.is_set():
                    job.abandoned = True
                    self._stuck[key] = self._stuck.get(key, 0) + 1
                    self.timeouts += 1
            if job.abandoned:
                log.warning("reading the repository of %s took over %.0f s: its code state is unknown until that read "
                            "returns (a hung mount?); other projects go on", key, self.timeout)  # fmt: skip
                return default
        if job.error is not None:
            raise job.error
        return job.result

    def _start(self) -> queue.SimpleQueue:
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(inbox,), name="repository-reader", daemon=True).start()
        return inbox

    def _serve(self, inbox: queue.SimpleQueue) -> None:
        while True:
            job = inbox.get()
            try:
                job.result = job.fn(*job.args)
            except BaseException as exc:  # handed to the caller, who decides
                job.error = exc
            with self._lock:
                job.done.set()
                if job.abandoned:
                    left = self._stuck.get(job.key, 0) - 1
                    if left > 0:
                        self._stuck[job.key] = left
                    else:
                        self._stuck.pop(job.key, None)
                    log.warning("the read of %s that was stuck came back; its repository is read again", job.key)
                self._idle.append(inbox)
