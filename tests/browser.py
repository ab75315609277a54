"""A headless Chromium driven over the DevTools protocol, for clicking through the web viewer.

Only what the viewer tests need: open a URL, run JavaScript in the page, wait
for a condition, click a button by its label, and answer `window.confirm`
dialogs the way a person would (each one is counted).

    with Browser(chromium_path, profile_dir) as browser:
        browser.open(url)
        browser.wait_for("document.querySelector('h2')?.textContent === 'Approvals'")
        browser.click_button("Approve")
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str, profile: Path, *, timeout: float = 30.0):
        self.executable = executable
        self.profile = profile
        self.timeout = timeout
        self.dialogs: list[str] = []  # messages of the confirm dialogs answered, in order
        self._process: subprocess.Popen | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._ws = None
        self._session = None
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}

    # --- life cycle ---------------------------------------------------------------------

    def __enter__(self) -> Browser:
        self._process = subprocess.Popen(
            [self.executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        port = self._devtools_port()
        self._thread.start()
        self._call(self._connect(port))
        self.send("Page.enable")
        self.send("Runtime.enable")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ws is not None:
            self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()

    def _devtools_port(self) -> int:
        """Chromium prints `DevTools listening on ws://127.0.0.1:PORT/...` once it is ready."""
        deadline = time.monotonic() + self.timeout
        assert self._process is not None and self._process.stderr is not None
        while time.monotonic() < deadline:
            line = self._process.stderr.readline()
            if not line and self._process.poll() is not None:
                raise BrowserError(f"chromium exited with {self._process.returncode}")
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                threading.Thread(target=self._process.stderr.read, daemon=True).start()  # keep the pipe drained
                return int(found.group(1))
        raise BrowserError("chromium did not open its DevTools port")

    async def _connect(self, port: int) -> None:
        import aiohttp

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            pages = [t for t in json.load(response) if t["type"] == "page"]
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        asyncio.ensure_future(self._read())

    async def _close(self) -> None:
        await self._ws.close()
        await self._session.close()

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Page.javascriptDialogOpening":
                self.dialogs.append(data["params"]["message"])
                # Not awaited here: its reply arrives through this very loop.
                asyncio.ensure_future(self._send("Page.handleJavaScriptDialog", {"accept": True}))

    # --- the protocol -------------------------------------------------------------------

    def _call(self, coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(self.timeout)

    async def _send(self, method: str, params: dict | None = None) -> dict:
        self._next_id += 1
        future = self._loop.create_future()
        self._pending[self._next_id] = future
        await self._ws.send_str(json.dumps({"id": self._next_id, "method": method, "params": params or {}}))
        return await future

    def send(self, method: str, params: dict | None = None) -> dict:
        reply = self._call(self._send(method, params))
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    # --- what tests use -----------------------------------------------------------------

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str) -> Any:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            value = self.evaluate(f"(() => {{ try {{ return {expression}; }} catch (e) {{ return false; }} }})()")
            if value:
                return value
            time.sleep(0.1)
        raise BrowserError(f"timed out waiting for {expression}")

    def click_button(self, label: str, *, near: str | None = None) -> None:
        """Click the first button whose text is `label` (waiting for it to appear); with `near`,
        the first one in a card (`li`) whose text contains `near`."""
        scope = "document"
        if near is not None:
            scope = f"[...document.querySelectorAll('li')].find((li) => li.textContent.includes({json.dumps(near)}))"
        finder = f"[...{scope}.querySelectorAll('button')].find((b) => b.textContent.trim() === {json.dumps(label)})"
        self.wait_for(f"!!{finder}")
        # Dispatched in a task so that a confirm() it opens does not block this evaluation.
        self.evaluate(f"setTimeout(() => {finder}.click(), 0); true")
