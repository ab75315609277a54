"""Reading a small file that someone else controls, without blocking and without growing.

A repository's `.git` (or a transcript's path) is whatever its owner made it: a FIFO,
a device (`/dev/zero`), a symlink to one, a file of gigabytes. `open()` of a FIFO
waits for a writer forever, and `read()` of a device never ends. These readers open
with O_NONBLOCK (a FIFO then opens at once) and read only what `fstat` says is a
regular file, at most `limit` bytes. Standard library only: the hooks import it.
"""

from __future__ import annotations

import os
import stat

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


class NotRegular(OSError):
    """The path is not a regular file (a FIFO, a device, a socket, a directory), or is too large."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_file(path: str | os.PathLike[str], limit: int | None = None):
    """`path` opened for reading in binary, as `open_regular` checks it (the caller closes it)."""
    return os.fdopen(open_regular(os.fspath(path), limit), "rb")


def open_regular(path: str, limit: int | None) -> int:
    """A descriptor of `path`, opened without blocking; NotRegular unless it is a regular file of
    at most `limit` bytes (any size with None). The caller closes it."""
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{path} is {_kind(info.st_mode)}")
        if limit is not None and info.st_size > limit:
            raise NotRegular(f"{path} holds {info.st_size} bytes, more than {limit}")
        # A regular file read with O_NONBLOCK behaves as without it; clear it anyway, so a
        # file system that honours it (some FUSE ones) does not answer EAGAIN mid-read.
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, limit: int) -> bytes | None:
    """The bytes of `path` when it is a regular file of at most `limit` bytes, else None
    (absent, unreadable, not a regular file, too large, or grown past `limit` while read)."""
    try:
        fd = open_regular(path, limit)
    except (OSError, ValueError):
        return None
    try:
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                return None
    except OSError:
        return None
    finally:
        os.close(fd)


def read_start(path: str, nbytes: int) -> bytes | None:
    """The first `nbytes` of `path` when it is a regular file (of any size), else None."""
    try:
        fd = open_regular(path, None)
    except (OSError, ValueError):
        return None
    try:
        chunks, size = [], 0
        while size < nbytes:
            chunk = os.read(fd, nbytes - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_text(path: str, limit: int) -> str | None:
    """`read_regular` as text (UTF-8, undecodable bytes replaced), stripped; None when empty."""
    data = read_regular(path, limit)
    if data is None:
        return None
    return data.decode("utf-8", "replace").strip() or None
