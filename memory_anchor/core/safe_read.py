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
    data = _read_head(path, limit + 1, limit)
    return data if data is not None and len(data) <= limit else None


def read_start(path: str, nbytes: int) -> bytes | None:
    """The first `nbytes` of `path` when it is a regular file (of any size), else None."""
    return _read_head(path, nbytes, None)


def _read_head(path: str, nbytes: int, limit: int | None) -> bytes | None:
    """Up to `nbytes` from the start of `path`, opened as `open_regular` checks it (`limit`), in
    reads of at most 1 MiB; None when it cannot be opened or read."""
    try:
        fd = open_regular(path, limit)
    except (OSError, ValueError):
        return None
    try:
        chunks, size = [], 0
        while size < nbytes:
            chunk = os.read(fd, min(1 << 20, nbytes - size))
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
