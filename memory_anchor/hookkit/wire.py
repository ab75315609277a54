"""Talk to the worker from a hook: read worker.json, one HTTP/1.1 exchange over a raw socket.

`json`, `socket`, `http.client` and `urllib` each cost more to import than the
whole PostToolUse budget, so this module uses the C `_socket` module and reads
worker.json's few scalar fields by hand (falling back to `json` if the file is
written in a way the quick reader does not understand).
"""

from __future__ import annotations

import _socket
import os

# Characters left as they are in a query string value.
_URL_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


class WorkerInfo:
    """Where the running worker listens (REST `port`, MCP endpoint `mcp_port`) and the bearer token it expects."""

    __slots__ = ("host", "port", "token", "pid", "version", "mcp_port", "project_names")

    def __init__(
        self, host: str, port: int, token: str, pid: int | None = None, version: str | None = None,
        mcp_port: int | None = None, project_names: str = "path",
    ):  # fmt: skip
        self.host = host
        self.port = port
        self.token = token
        self.pid = pid
        self.version = version
        self.mcp_port = mcp_port
        self.project_names = project_names  # memory_anchor/core/projects.py: "path" or "remote"


def _quick_scalar(text: str, key: str):
    """The value of a top-level `"key": <string or integer>` pair, or None if not simple."""
    start = text.find(f'"{key}"')
    if start < 0:
        return None
    colon = text.find(":", start + len(key) + 2)
    if colon < 0:
        return None
    rest = text[colon + 1 :].lstrip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        value = rest[1:end]
        if end < 0 or "\\" in value:
            raise ValueError("escaped string")
        return value
    digits = ""
    for char in rest:
        if char.isdigit():
            digits += char
        else:
            break
    if not digits:
        raise ValueError(f"{key} is not a plain integer or string")
    return int(digits)


def parse_worker_info(text: str) -> WorkerInfo | None:
    """worker.json's content → WorkerInfo; None when it lacks a port or token."""
    keys = ("port", "token", "host", "pid", "version", "mcp_port", "project_names")
    try:
        port, token, host, pid, version, mcp_port, project_names = (_quick_scalar(text, key) for key in keys)
    except ValueError:
        import json

        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        port, token, host, pid, version, mcp_port, project_names = (data.get(key) for key in keys)
    if not isinstance(port, int) or not isinstance(token, str) or not token:
        return None
    return WorkerInfo(
        host if isinstance(host, str) and host else "127.0.0.1",
        port,
        token,
        pid if isinstance(pid, int) else None,
        version if isinstance(version, str) else None,
        mcp_port if isinstance(mcp_port, int) and mcp_port > 0 else None,
        project_names if isinstance(project_names, str) and project_names else "path",
    )


def read_worker_info(path: str) -> WorkerInfo | None:
    """The worker's address and token, or None when no worker has written worker.json."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return parse_worker_info(text)


def quote(value: str) -> str:
    """Percent-encode a query string value (urllib.parse is too slow to import here)."""
    return "".join(chr(b) if b in _URL_SAFE else "%%%02X" % b for b in value.encode("utf-8"))


def _header_value(value: str) -> str | None:
    """A value safe to put in a header line (no CR/LF, latin-1), else None."""
    if "\r" in value or "\n" in value:
        return None
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return None
    return value


class Response:
    __slots__ = ("status", "body")

    def __init__(self, status: int, body: bytes):
        self.status = status
        self.body = body


def _decode_chunked(data: bytes) -> bytes:
    out = b""
    while data:
        line, _, data = data.partition(b"\r\n")
        size = int(line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return out


def send(
    info: WorkerInfo,
    method: str,
    target: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 2.0,
) -> Pending:
    """Connect and send one request; `.response()` reads the answer. OSError when the worker is unreachable.

    The two steps are apart so that a hook with a second question for the
    worker asks it meanwhile, and the two round trips overlap.
    """
    family = _socket.AF_INET6 if ":" in info.host else _socket.AF_INET
    host = "127.0.0.1" if info.host == "localhost" else info.host
    lines = [
        f"{method} {target} HTTP/1.1",
        f"Host: {host}:{info.port}",
        f"Authorization: Bearer {info.token}",
        "Connection: close",
    ]
    if body or method in ("POST", "PUT"):
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    for name, value in (headers or {}).items():
        safe = _header_value(value)
        if safe is not None:
            lines.append(f"{name}: {safe}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((host, info.port))
        sock.sendall(request)
    except BaseException:
        sock.close()
        raise
    return Pending(sock, f"{host}:{info.port}")


class Pending:
    """A request sent on its own connection, its answer not read yet."""

    __slots__ = ("sock", "address")

    def __init__(self, sock, address: str):
        self.sock = sock
        self.address = address

    def response(self, want_body: bool = True) -> Response:
        """Read the answer and close; OSError on failure.

        `want_body=False` returns as soon as the status line has arrived: a hook that
        only needs to know its event was accepted does not wait for the rest.
        """
        received = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                received += chunk
                if not want_body and b"\r\n" in received:
                    break
                head_end = received.find(b"\r\n\r\n")
                if head_end >= 0:
                    length = _content_length(received[:head_end])
                    if length is not None and len(received) - head_end - 4 >= length:
                        break
        finally:
            self.sock.close()

        status_line, _, rest = received.partition(b"\r\n")
        parts = status_line.split()
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise ConnectionError(f"not an HTTP response from {self.address}")
        status = int(parts[1])
        if not want_body:
            return Response(status, b"")
        head, _, payload = rest.partition(b"\r\n\r\n")
        length = _content_length(b"\r\n" + head)
        if length is not None:
            payload = payload[:length]
        elif b"transfer-encoding: chunked" in head.lower():
            payload = _decode_chunked(payload)
        return Response(status, payload)


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def new_event_id() -> str:
    """A random UUID4 string (the uuid module costs milliseconds to import)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
