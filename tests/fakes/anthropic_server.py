"""A fake Anthropic Messages API on 127.0.0.1, for tests and the real Claude Code CLI.

A real HTTP server (stdlib `ThreadingHTTPServer` in a thread), so the code under
test talks to it exactly as it would to api.anthropic.com: the `anthropic` SDK
with `ANTHROPIC_BASE_URL`, or the `claude` binary. It serves

- `POST /v1/messages` (also `?beta=true`), non-streaming JSON or, with
  `"stream": true`, server-sent events in the order Claude Code expects:
  message_start, content_block_start, ping, content_block_delta (text_delta /
  input_json_delta), content_block_stop, message_delta, message_stop;
- `POST /v1/messages/count_tokens`, `GET /v1/models[/{id}]`, `HEAD /`;
- control endpoints for a test driving a separate process:
  `GET|DELETE /_fake/requests` (the request log), `POST /_fake/replies` (queue).

What to answer: queued replies first (`enqueue`, FIFO), then `responder(request)`
(return None to pass), then `default`. A reply may be an error (429 with
`retry-after`, 500, 529, ...) or slow (`delay`), for fault injection.

In pytest use the `fake_anthropic` fixture (tests/fakes/fixtures.py). As a
process: `python -m tests.fakes.anthropic_server --port-file F [--script S]
[--log-file L]`; the port is written to F once the server listens. A script is
a `.json` file (`{"replies": [...], "default": ...}` or a list of replies) or a
`.py` file defining `respond(request)` and/or `REPLIES` / `DEFAULT`; reply
dicts are described in `Reply.from_obj`.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DEFAULT_MODEL = "claude-haiku-4-5"
MODELS = ["claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-1"]
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ids = itertools.count(1)


@dataclass
class Reply:
    """One answer to a /v1/messages request."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None  # default: tool_use if a tool_use block is present, else end_turn
    status: int = 200
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    input_tokens: int | None = None  # default: estimated from the request
    output_tokens: int | None = None  # default: estimated from the content
    raw_body: str | None = None  # send this body verbatim (malformed responses)

    @classmethod
    def from_obj(cls, obj: Any) -> "Reply":
        """A reply from its JSON form (scripts, the control endpoint).

        - `"some text"` or `{"text": "..."}`: a text reply;
        - `{"json": value}`: a text reply holding `json.dumps(value)`;
        - `{"tool_use": {"name", "input", "id"?}, "text"?: "..."}`: a tool call;
        - `{"content": [blocks], "stop_reason"?: ...}`: blocks as given;
        - `{"error": 429, "message"?, "retry_after"?}`: an error response;
        - any of them with `"delay"`, `"usage": {"input_tokens", "output_tokens"}`.
        """
        if isinstance(obj, Reply):
            return obj
        if isinstance(obj, str):
            return text_reply(obj)
        if not isinstance(obj, dict):
            raise ValueError(f"a reply must be a string or an object, not {type(obj).__name__}")
        usage = obj.get("usage") or {}
        common = {
            "delay": float(obj.get("delay", 0)),
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
        }
        if "error" in obj:
            return error_reply(
                int(obj["error"]), obj.get("message", ""), retry_after=obj.get("retry_after"), delay=common["delay"]
            )
        if "json" in obj:
            return Reply(content=[{"type": "text", "text": json.dumps(obj["json"])}], **common)
        if "tool_use" in obj:
            call = obj["tool_use"]
            return tool_use_reply(call["name"], call.get("input", {}), id=call.get("id"), text=obj.get("text"), **common)
        if "content" in obj:
            return Reply(content=list(obj["content"]), stop_reason=obj.get("stop_reason"), **common)
        if "text" in obj:
            return Reply(content=[{"type": "text", "text": str(obj["text"])}], stop_reason=obj.get("stop_reason"), **common)
        raise ValueError(f"cannot make a reply of {obj!r}")


def text_reply(text: str, **kwargs: Any) -> Reply:
    return Reply(content=[{"type": "text", "text": text}], **kwargs)


def json_reply(value: Any, **kwargs: Any) -> Reply:
    return text_reply(json.dumps(value), **kwargs)


def tool_use_reply(name: str, input: dict[str, Any], *, id: str | None = None, text: str | None = None, **kwargs: Any) -> Reply:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append({"type": "tool_use", "id": id or f"toolu_fake{next(_ids):06d}", "name": name, "input": input})
    return Reply(content=blocks, **kwargs)


def error_reply(status: int, message: str = "", *, retry_after: float | None = None, delay: float = 0.0) -> Reply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Reply(status=status, error_message=message or f"fake error {status}", headers=headers, delay=delay)


# --- reading requests (for responders and assertions) -----------------------------


def _strip_reminders(text: str) -> str:
    while "<system-reminder>" in text:
        start = text.index("<system-reminder>")
        end = text.find("</system-reminder>", start)
        text = text[:start] + (text[end + len("</system-reminder>") :] if end != -1 else "")
    return text.strip()


def user_texts(message: dict[str, Any]) -> list[str]:
    """The text blocks of one message, `<system-reminder>` blocks removed."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    texts = [_strip_reminders(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return [t for t in texts if t]


def last_user_prompt(request: dict[str, Any]) -> str:
    """The last real user text in a request (tool results and reminders skipped; so is the text
    Claude Code puts beside a tool result, e.g. 2.1.332's "Tool loaded." after ToolSearch)."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user" and not _has_tool_result(message):
            texts = user_texts(message)
            if texts:
                return texts[-1]
    return ""


def _has_tool_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def trailing_tool_results(request: dict[str, Any]) -> int:
    """How many tool_result turns follow the last real user prompt."""
    count = 0
    for message in reversed(request.get("messages") or []):
        if message.get("role") != "user":
            continue
        if _has_tool_result(message):
            count += 1
            continue
        break
    return count


def request_text(request: dict[str, Any]) -> str:
    """Everything a request says (system + messages) as one string, for assertions."""
    return json.dumps({"system": request.get("system"), "messages": request.get("messages")}, ensure_ascii=False)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it is not JSON
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "headers": self.headers, "body": self.body, "at": self.at}


Responder = Callable[[dict[str, Any]], Any]


class FakeAnthropicServer:
    def __init__(
        self,
        *,
        port: int = 0,
        responder: Responder | None = None,
        default: Any = "OK",
        api_key: str | None = None,
        log_file: Path | None = None,
        chunk_chars: int = 24,
    ):
        self.responder = responder
        self.default: Any = Reply.from_obj(default)
        self.api_key = api_key  # when set, other keys get 401
        self.log_file = Path(log_file) if log_file else None
        self.chunk_chars = chunk_chars
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeAnthropicServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeAnthropicServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- scripting -----------------------------------------------------------------

    def enqueue(self, *replies: Any) -> None:
        """Answer the next /v1/messages requests with these, in order."""
        with self._lock:
            self._queue.extend(Reply.from_obj(r) for r in replies)

    def fail_next(self, status: int, times: int = 1, *, retry_after: float | None = None) -> None:
        """The next `times` /v1/messages requests fail with `status`."""
        self.enqueue(*[error_reply(status, retry_after=retry_after) for _ in range(times)])

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._queue)

    def messages(self) -> list[dict[str, Any]]:
        """Bodies of every /v1/messages request so far (count_tokens excluded)."""
        with self._lock:
            return [
                r.body for r in self.requests
                if r.method == "POST" and urlsplit(r.path).path == "/v1/messages" and isinstance(r.body, dict)
            ]  # fmt: skip

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._queue.clear()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            answer = self.responder(body)
            if answer is not None:
                return Reply.from_obj(answer)
        return Reply.from_obj(self.default)  # a test may set a str/dict as well as a Reply

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            if self.log_file:
                with open(self.log_file, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(request.to_json(), ensure_ascii=False) + "\n")


# --- HTTP ------------------------------------------------------------------------------


def _estimate_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False, default=str)) // 4)


def _handler_for(server: FakeAnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeAnthropic/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest captures enough
            pass

        # --- plumbing --------------------------------------------------------------

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            text = raw.decode("utf-8", "replace")
            try:
                return json.loads(text) if text else None
            except ValueError:
                return text

        def _send_json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(value).encode()
            self._send_raw(status, data, "application/json", headers)

        def _send_raw(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_fake{next(_ids):06d}")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _send_error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
            error = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
            self._send_json(status, {"type": "error", "error": error}, headers)

        def _authorized(self) -> bool:
            if server.api_key is None:
                return True
            given = self.headers.get("x-api-key") or self.headers.get("Authorization", "").removeprefix("Bearer ")
            return given == server.api_key

        def _handle(self) -> None:
            body = self._body() if self.command in ("POST", "PUT", "DELETE") else None
            path = urlsplit(self.path).path
            if not path.startswith("/_fake/"):
                server._record(RecordedRequest(self.command, self.path, dict(self.headers), body, time.time()))
            try:
                self._route(path, body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        # --- routes --------------------------------------------------------------------

        def _route(self, path: str, body: Any) -> None:
            if path.startswith("/_fake/"):
                return self._control(path, body)
            if path in ("/", "") and self.command in ("HEAD", "GET"):
                return self._send_json(200, {"status": "ok", "fake": True})
            if not self._authorized():
                return self._send_error(401, "invalid x-api-key")
            if path == "/v1/messages" and self.command == "POST":
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    return self._send_error(400, "messages: field required (a JSON body is expected)")
                return self._messages(body)
            if path == "/v1/messages/count_tokens" and self.command == "POST":
                return self._send_json(200, {"input_tokens": _estimate_tokens(body)})
            if path == "/v1/models" and self.command == "GET":
                data = [_model(m) for m in MODELS]
                return self._send_json(
                    200, {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}
                )
            if path.startswith("/v1/models/") and self.command == "GET":
                return self._send_json(200, _model(path.rsplit("/", 1)[-1]))
            return self._send_error(404, f"no route {self.command} {path}")

        def _control(self, path: str, body: Any) -> None:
            if path == "/_fake/requests" and self.command == "GET":
                with server._lock:
                    log = [r.to_json() for r in server.requests]
                return self._send_json(200, {"requests": log})
            if path == "/_fake/requests" and self.command == "DELETE":
                server.reset()
                return self._send_json(200, {"cleared": True})
            if path == "/_fake/replies" and self.command == "POST":
                try:
                    server.enqueue(*(body if isinstance(body, list) else [body]))
                except (ValueError, KeyError, TypeError) as exc:
                    return self._send_error(400, f"bad reply: {exc}")
                return self._send_json(200, {"queued": server.pending_replies})
            return self._send_error(404, f"no control route {self.command} {path}")

        def _messages(self, body: dict[str, Any]) -> None:
            try:
                reply = server._next_reply(body)
            except Exception as exc:  # a broken responder is the test's bug: say so clearly
                return self._send_error(500, f"fake responder failed: {type(exc).__name__}: {exc}")
            if reply.delay:
                time.sleep(reply.delay)
            if reply.status != 200:
                return self._send_error(reply.status, reply.error_message, reply.headers)
            if reply.raw_body is not None:
                return self._send_raw(200, reply.raw_body.encode(), "application/json", reply.headers)
            message = _message(body, reply)
            if body.get("stream"):
                return self._stream(message, reply.headers)
            return self._send_json(200, message, reply.headers)

        def _stream(self, message: dict[str, Any], headers: dict[str, str]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", f"req_fake{next(_ids):06d}")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            for event, data in _stream_events(message, server.chunk_chars):
                chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        do_GET = do_POST = do_HEAD = do_DELETE = _handle

    return Handler


def _model(model_id: str) -> dict[str, Any]:
    return {"type": "model", "id": model_id, "display_name": model_id, "created_at": "2025-01-01T00:00:00Z"}


def _message(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    content = [dict(block) for block in reply.content]
    stop = reply.stop_reason or ("tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn")
    input_tokens = reply.input_tokens if reply.input_tokens is not None else _estimate_tokens(
        {"system": request.get("system"), "messages": request.get("messages"), "tools": request.get("tools")}
    )
    output_tokens = reply.output_tokens if reply.output_tokens is not None else _estimate_tokens(content)
    return {
        "id": f"msg_fake{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model") or DEFAULT_MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _stream_events(message: dict[str, Any], chunk_chars: int) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events for a message, in the API's order."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        if kind == "tool_use":
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _chunks(json.dumps(block.get("input", {})), chunk_chars)
            ]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _chunks(block.get("thinking", ""), chunk_chars)]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "fake-signature")})
        else:
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block.get("text", ""), chunk_chars)]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --- running as a process ----------------------------------------------------------------


def load_script(path: Path) -> dict[str, Any]:
    """`responder`, `replies` and `default` from a .json or .py script."""
    path = Path(path)
    if path.suffix == ".py":
        spec = importlib.util.spec_from_file_location("fake_anthropic_script", path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return {
            "responder": getattr(module, "respond", None),
            "replies": list(getattr(module, "REPLIES", [])),
            "default": getattr(module, "DEFAULT", "OK"),
        }
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list):
        data = {"replies": data}
    return {"responder": None, "replies": data.get("replies", []), "default": data.get("default", "OK")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake Anthropic Messages API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0: a free one)")
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    parser.add_argument("--script", type=Path, help=".json or .py file scripting the replies")
    parser.add_argument("--log-file", type=Path, help="append every request as a JSON line")
    parser.add_argument("--api-key", help="accept only this key (others get 401)")
    args = parser.parse_args(argv)

    script = load_script(args.script) if args.script else {"responder": None, "replies": [], "default": "OK"}
    server = FakeAnthropicServer(
        port=args.port,
        responder=script["responder"],
        default=script["default"],
        api_key=args.api_key,
        log_file=args.log_file,
    )
    server.enqueue(*script["replies"])
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    if args.port_file:
        tmp = args.port_file.with_name(args.port_file.name + ".tmp")
        tmp.write_text(str(server.port), encoding="utf-8")
        os.replace(tmp, args.port_file)
    print(f"fake Anthropic API listening on {server.base_url}", file=sys.stderr, flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
