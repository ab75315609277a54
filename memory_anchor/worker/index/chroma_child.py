"""The local Chroma in a child process: chromadb's code and memory are never the worker's.

Importing chromadb costs a process about 29 MB of code pages (its Rust
bindings and gRPC) and its module objects, and a `PersistentClient` that has
written a few thousand vectors still holds about 24 MB after it closes
(measured). The worker runs all day; Chroma is needed only to write vectors,
delete them, and read them back when the vector snapshot is stale. So the
worker starts this module as a child (`python -m
memory_anchor.worker.index.chroma_child <chroma dir>`) when it first needs
Chroma and stops it when it has been idle a while (chroma_store.py): what the
child held goes back to the system with it.

The two talk over the child's stdin and stdout, one request and one reply at a
time, each a pickle after its length (8 bytes, big-endian). No socket is
opened. The child runs `ChromaShards` (chroma_shards.py) on the request's
operation and answers ("ok", value) or ("error", [(type, errno, message), ...]),
the exception and what it was raised from: the worker raises `ChromaError`
with the same chain, so a full disk is still recognised as one
(store/disk.py) without the worker importing chromadb's exception classes.

The child ends when its stdin closes: after the worker stops it, and also when
the worker is killed (the kernel closes the worker's end), once the call under
way is done. It ignores SIGINT for the same reason: a Ctrl-C in the worker's
terminal reaches the whole process group, and the worker decides when it stops.
A child that dies mid-call makes that call raise in the worker; the next call
starts a new child. A child holds a lock on its Chroma directory while it runs, so
the child of a worker started after a killed one waits for the old child to exit.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">Q")
OPERATIONS = frozenset({"add", "get", "delete", "count", "shard_numbers", "page", "drop", "close"})
LOCK_FILE = "chroma-process.lock"  # in the Chroma directory: held by the process that has it open
STOP_TIMEOUT_SECONDS = 60.0  # closing persists the open shard's index: well under a second, even loaded


class ChromaError(RuntimeError):
    """Chroma failed in the child process, or the child exited during a call."""


def _send(stream: BinaryIO, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(body)))
    stream.write(body)
    stream.flush()


def _receive(stream: BinaryIO) -> Any | None:
    """The next message, or None when the other end has closed (a message cut short counts as closed)."""
    head = _read_exactly(stream, _LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(stream, _LENGTH.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# --- the worker's side ----------------------------------------------------------------------------


class ChromaChild:
    """The worker's handle on the child: `ChromaShards`' methods, each a call to the child.

    Not thread-safe: its owner (`ChromaStore`) makes one call at a time.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._process: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self._process is not None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _start(self) -> subprocess.Popen:
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(self.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        log.debug("started the Chroma process %d", self._process.pid)
        return self._process

    def call(self, operation: str, *args: Any) -> Any:
        process = self._process or self._start()
        cause: BaseException | None = None
        try:
            _send(process.stdin, (operation, args))
            reply = _receive(process.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:  # a broken pipe, a reply cut short
            reply, cause = None, exc
        except BaseException:  # interrupted between request and reply: the next reply would be this one's
            self._reap()
            raise
        if reply is None:
            code = self._reap()
            raise ChromaError(f"the Chroma process exited (code {code}) during {operation}") from cause
        status, value = reply
        if status == "ok":
            return value
        raise _rebuilt(value)

    def _reap(self) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:  # alive but no longer making sense: start afresh
            process.kill()
        code = process.wait()
        _close_pipes(process)
        return code

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Close the child's stdin and wait for it to close Chroma and exit."""
        process = self._process
        if process is None:
            return
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("the Chroma process %d did not exit within %.0f s; killed", process.pid, timeout)
            process.kill()
            process.wait()
        finally:
            self._process = None  # only once it has exited: `running` means its files may be open
        _close_pipes(process)
        log.debug("the Chroma process %d exited with %s", process.pid, process.returncode)

    # ChromaShards' interface

    def add(self, seqs, embeddings, metadatas) -> None:
        self.call("add", seqs, embeddings, metadatas)

    def get(self, seqs):
        return self.call("get", seqs)

    def delete(self, seqs) -> None:
        self.call("delete", seqs)

    def count(self) -> int:
        return self.call("count")

    def shard_numbers(self) -> list[int]:
        return self.call("shard_numbers")

    def page(self, shard: int, offset: int, limit: int):
        return self.call("page", shard, offset, limit)

    def drop(self) -> None:
        self.call("drop")

    def close(self) -> None:
        """Close the child's client (its indexes' memory goes) and keep the child; nothing when none runs."""
        if self._process is not None:
            self.call("close")


def _close_pipes(process: subprocess.Popen) -> None:
    for stream in (process.stdin, process.stdout):
        try:
            stream.close()
        except OSError:
            pass


def _chain(exc: BaseException) -> list[tuple[str, int | None, str]]:
    """The exception and those it was raised from, as plain values: (type, errno, message)."""
    out = []
    while exc is not None and len(out) < 16:
        number = exc.errno if isinstance(exc, OSError) and isinstance(exc.errno, int) else None
        out.append((f"{type(exc).__module__}.{type(exc).__qualname__}", number, str(exc)))
        exc = exc.__cause__ or exc.__context__
    return out


def _rebuilt(chain: list[tuple[str, int | None, str]]) -> ChromaError:
    cause: BaseException | None = None
    for name, number, message in reversed(chain):
        exc: BaseException = OSError(number, message) if number is not None else ChromaError(f"{name}: {message}")
        exc.__cause__ = cause
        cause = exc
    name, _number, message = chain[0]
    outer = ChromaError(f"{name}: {message}")
    outer.__cause__ = cause
    return outer


# --- the child's side -----------------------------------------------------------------------------


def prepare_process() -> None:
    """What the child does before anything else: the worker's malloc settings.

    Chroma writes its HNSW index's whole capacity to disk, slots no vector uses
    included, as malloc handed them out (index/heap.py): every freed block is
    cleared here as in the worker, so no earlier bytes of this process reach
    Chroma's files.
    """
    from memory_anchor.worker.index import heap

    heap.configure_malloc()
    heap.clear_reused_memory()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def hold_directory(path: str) -> BinaryIO | None:
    """Wait until no other process has this Chroma directory, then keep it until this one exits.

    A killed worker's child finishes the call under way before it sees its stdin close, and the
    next worker on the data dir may start its own meanwhile: two clients on one directory would
    each write their copy of an index. The lock goes with the process (the kernel drops it).
    """
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the worker's data-dir lock is the only guard
        return None
    Path(path).mkdir(parents=True, exist_ok=True)
    handle = open(Path(path) / LOCK_FILE, "ab")  # noqa: SIM115 - held for the process's life
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def serve(path: str, requests: BinaryIO, replies: BinaryIO) -> None:
    from memory_anchor.worker.index.chroma_shards import ChromaShards, persistent_client

    held = hold_directory(path)  # noqa: F841 - the lock lasts as long as the handle
    shards = ChromaShards(persistent_client(path))
    try:
        while True:
            request = _receive(requests)
            if request is None:
                return
            operation, args = request
            try:
                if operation not in OPERATIONS:
                    raise ValueError(f"unknown operation {operation!r}")
                reply = ("ok", getattr(shards, operation)(*args))
            except Exception as exc:  # every failure goes back to the worker, which raises it
                reply = ("error", _chain(exc))
            _send(replies, reply)
    finally:
        shards.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    prepare_process()
    # Replies go out on a private copy of stdout, and fd 1 becomes stderr: nothing a library
    # prints can fall into the replies. Stdin likewise is read through a copy only.
    replies = os.fdopen(os.dup(1), "wb")
    requests = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="chroma process: %(name)s: %(message)s")
    serve(argv[0], requests, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
