"""The stdio side of the MCP server: relay Claude Code's JSON-RPC to the worker's MCP endpoint.

Claude Code starts this from the plugin's .mcp.json with `python3 -S`, like
the hooks, so it is standard library only and costs a few MB and a few ms; the
`mcp` SDK and the tools run in the worker (memory_anchor/worker/api/mcp_endpoint.py), which is
already loaded and serves every session.

- Finding the worker: worker.json (`mcp_port`, bearer token); a worker that is
  down is started, or its environment bootstrapped, by the hooks' own code
  (memory_anchor/hookkit/launcher.py).
- The connection: one hello line (memory_anchor/schemas/mcp.py), one welcome
  line, then newline-delimited JSON-RPC both ways, exactly as on stdio.
- Faults: when the connection drops (the worker restarted) the requests it
  held get an error and the next message reconnects, replaying the client's
  `initialize` so the new server session continues where the old one was.
  Every wait is bounded: a worker that cannot be reached, or that does not
  answer a request in time, produces a JSON-RPC error the model can read.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from memory_anchor.core import paths
from memory_anchor.hookkit import jsonlite, wire

# Claude Code may not pass CLAUDE_PLUGIN_DATA to MCP servers; .mcp.json forwards it under this name.
PLUGIN_DATA_VAR = "MEMORY_ANCHOR_PLUGIN_DATA"
# Seconds. Claude Code gives a server about 30 s to answer `initialize` (or the
# `server/discover` probe): long enough for a first-run environment build to
# finish if it is nearly done.
FIRST_CONNECT_WAIT = 20.0
# Reconnecting after the worker went away: a worker restart takes a few seconds.
RECONNECT_WAIT = 15.0
CONNECT_TIMEOUT = 2.0
WELCOME_TIMEOUT = 5.0
# A request the worker has not answered in this long gets an error (its tools'
# own REST calls time out at 30 s).
REQUEST_TIMEOUT = 120.0
REPLAY_ID_PREFIX = "memory-anchor-bridge-replay-"
OPENING_METHODS = ("initialize", "server/discover")
# JSON-RPC error codes: the server could not be reached / did not answer.
UNREACHABLE = -32000
TIMED_OUT = -32001


def data_dir() -> str:
    forwarded = os.environ.get(PLUGIN_DATA_VAR, "").strip()
    if forwarded and "${" not in forwarded and not os.environ.get("MEMORY_ANCHOR_DATA_DIR"):
        return forwarded
    return paths.data_dir_str()


def plugin_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BridgeError(Exception):
    """Why the worker cannot serve this session right now (the text goes to the model)."""


class Connection:
    """One authenticated stream to the worker's MCP endpoint."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.closed = False

    @classmethod
    def open(cls, info: wire.WorkerInfo, hello: bytes) -> Connection:
        import _socket

        family = _socket.AF_INET6 if ":" in info.host else _socket.AF_INET
        host = "127.0.0.1" if info.host == "localhost" else info.host
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect((host, info.mcp_port))
            sock.settimeout(WELCOME_TIMEOUT)
            sock.sendall(hello)
            connection = cls(sock)
            welcome = connection.read_line()
        except OSError:
            sock.close()
            raise
        try:
            answer = jsonlite.loads(welcome or b"null")
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            sock.close()
            reason = answer.get("error") if isinstance(answer, dict) else "no welcome"
            raise ConnectionRefusedError(f"the worker refused the MCP session: {reason}")
        return connection

    def read_line(self) -> bytes | None:
        """The next line (without its newline); None at end of stream. Raises socket.timeout."""
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def send(self, line: bytes) -> None:
        self.sock.sendall(line + b"\n")

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


class Bridge:
    """Claude Code's stdin/stdout on one side, the worker's endpoint on the other."""

    def __init__(self, data_dir: str, stdin, stdout):
        self.data_dir = data_dir
        self.stdin = stdin
        self.stdout = stdout
        self.lock = threading.Lock()  # guards connection, pending and stdout
        self.connection: Connection | None = None
        self.pending: dict = {}  # request id (as JSON text) → deadline
        self.initialize: dict | None = None  # the client's initialize request, replayed on reconnect
        self.initialized: bytes | None = None  # its notifications/initialized
        self.replays = 0

    # --- the worker side ---------------------------------------------------------

    def hello(self, info: wire.WorkerInfo) -> bytes:
        env = os.environ
        return jsonlite.dumps({  # ASCII: a cwd may hold undecodable bytes (surrogates)
            "protocol": 1,
            "token": info.token,
            "cwd": os.getcwd(),
            "project_dir": env.get("CLAUDE_PROJECT_DIR", ""),
            "session_id": env.get("CLAUDE_CODE_SESSION_ID", ""),
            "branch": env.get("MEMORY_ANCHOR_BRANCH", "").strip(),
            "agent_id": env.get("MEMORY_ANCHOR_AGENT_ID", "").strip(),
            "agent": env.get("MEMORY_ANCHOR_AGENT", "").strip(),
        }, ascii_only=True).encode("utf-8") + b"\n"  # fmt: skip

    def connect(self, wait: float) -> Connection:
        """A connection to the worker, starting it if it is down; BridgeError after `wait` seconds."""
        deadline = time.monotonic() + wait
        worker_json = paths.data_file(paths.WORKER_INFO, self.data_dir)
        asked = None
        last_error = "no worker.json"
        while True:
            info = wire.read_worker_info(worker_json)
            if info is not None and info.mcp_port:
                try:
                    return Connection.open(info, self.hello(info))
                except OSError as exc:
                    last_error = str(exc) or type(exc).__name__
            elif info is not None:
                last_error = "the running worker has no MCP endpoint (an older version; it restarts after an update)"
            if asked is None:
                from memory_anchor.hookkit import launcher  # only when the worker did not answer

                asked = launcher.ensure_worker(plugin_root(), self.data_dir)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        from memory_anchor.hookkit import launcher

        if launcher.worker_python(plugin_root(), self.data_dir) is None:
            log = paths.data_file(os.path.join(paths.LOGS, paths.BOOTSTRAP_LOG), self.data_dir)
            raise BridgeError("Memory Anchor is installing its Python environment (first run; see "
                              f"{log}). The memory tools will be available in a minute or in the next session.")  # fmt: skip
        worker_log = paths.data_file(os.path.join(paths.LOGS, paths.WORKER_LOG), self.data_dir)
        raise BridgeError(f"the Memory Anchor worker is not reachable ({last_error}); see {worker_log}")

    def reconnect(self, wait: float, *, replay: bool, current: bytes = b"") -> Connection:
        """Connect, and (`replay`) bring a new server session up to where the client's session is."""
        connection = self.connect(wait)
        if replay and self.initialize is not None:
            self.replays += 1
            again = dict(self.initialize, id=f"{REPLAY_ID_PREFIX}{self.replays}")
            connection.send(jsonlite.dumps(again, ascii_only=True).encode("utf-8"))
            if self.initialized is not None and self.initialized is not current:  # current: sent next
                connection.send(self.initialized)
        with self.lock:
            self.connection = connection
        threading.Thread(target=self.relay_answers, args=(connection,), daemon=True).start()
        return connection

    def relay_answers(self, connection: Connection) -> None:
        """Worker → Claude Code, until the connection ends; then fail what it still held."""
        connection.sock.settimeout(1.0)
        while True:
            try:
                line = connection.read_line()
            except TimeoutError:
                self.expire_requests(connection)
                continue
            except OSError:
                line = None
            if line is None:
                break
            if not line.strip():
                continue
            key = None
            try:
                message = jsonlite.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and "id" in message and "method" not in message:
                if str(message["id"]).startswith(REPLAY_ID_PREFIX):
                    continue  # the answer to a replayed initialize: the client has its own
                key = jsonlite.dumps(message["id"], ascii_only=True)
            with self.lock:
                if key is not None and self.pending.pop(key, None) is None:
                    continue  # answered already (timed out): the client must not get two answers
                self.write(line)
        with self.lock:
            if self.connection is connection:
                self.connection = None
                failed, self.pending = list(self.pending), {}
            else:
                failed = []
            for key in failed:
                self.write_error(key, UNREACHABLE, "The Memory Anchor worker stopped while handling this request "
                                                   "(it is restarting); try again.")  # fmt: skip
        connection.close()

    def expire_requests(self, connection: Connection) -> None:
        now = time.monotonic()
        with self.lock:
            if self.connection is not connection:
                return
            for key, deadline in list(self.pending.items()):
                if deadline <= now:
                    del self.pending[key]
                    self.write_error(key, TIMED_OUT, f"The Memory Anchor worker did not answer within "
                                                     f"{REQUEST_TIMEOUT:.0f} s; try again.")  # fmt: skip

    # --- the Claude Code side ----------------------------------------------------

    def write(self, line: bytes) -> None:
        """One message to Claude Code (the caller holds the lock)."""
        self.stdout.write(line + b"\n")
        self.stdout.flush()

    def write_error(self, key: str, code: int, message: str) -> None:
        answer = {"jsonrpc": "2.0", "id": jsonlite.loads(key), "error": {"code": code, "message": message}}
        self.write(jsonlite.dumps(answer, ascii_only=True).encode("utf-8"))

    def forward(self, line: bytes) -> None:
        """Claude Code → worker: one message, reconnecting once if the stream is gone."""
        try:
            message = jsonlite.loads(line)
        except ValueError:
            message = None
        is_request = isinstance(message, dict) and "method" in message and "id" in message
        # A session opens with `initialize` (protocol up to 2025-11-25) or, from Claude Code 2.1.292,
        # with a `server/discover` probe (2026-07-28, stateless: nothing to replay on reconnect).
        opens = is_request and message.get("method") in OPENING_METHODS
        is_initialize = is_request and message.get("method") == "initialize"
        if is_initialize:
            self.initialize = message
        elif isinstance(message, dict) and message.get("method") == "notifications/initialized":
            self.initialized = line
        key = jsonlite.dumps(message["id"], ascii_only=True) if is_request else None
        for _attempt in (1, 2):
            connection = self.connection
            if connection is None:
                wait = FIRST_CONNECT_WAIT if opens else RECONNECT_WAIT
                try:
                    connection = self.reconnect(wait, replay=not opens, current=line)
                except (BridgeError, OSError) as exc:  # OSError: the worker went away during the replay
                    if key is not None:
                        with self.lock:
                            self.write_error(key, UNREACHABLE, str(exc))
                    sys.stderr.write(f"memory-anchor: {exc}\n")
                    return
            with self.lock:
                if key is not None:
                    self.pending[key] = time.monotonic() + REQUEST_TIMEOUT
            try:
                connection.send(line)
                return
            except OSError:
                with self.lock:
                    if key is not None:
                        self.pending.pop(key, None)
                    if self.connection is connection:
                        self.connection = None
                connection.close()
        if key is not None:
            with self.lock:
                self.write_error(key, UNREACHABLE, "The Memory Anchor worker connection keeps failing; try again.")

    def run(self) -> int:
        while True:
            line = self.stdin.readline()
            if not line:
                break  # Claude Code closed the session
            line = line.rstrip(b"\r\n")
            if line.strip():
                self.forward(line)
        connection = self.connection
        if connection is not None:
            connection.close()
        return 0


def main() -> int:
    import _signal  # `signal` would import enum: milliseconds at every session start

    # Claude Code ends a server with SIGINT at the end of a session and waits for it to exit:
    # nothing here needs cleaning up (the worker sees the stream close), so leave at once.
    for name in ("SIGINT", "SIGTERM"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), lambda signum, frame: os._exit(0))
    return Bridge(data_dir(), sys.stdin.buffer, sys.stdout.buffer).run()
