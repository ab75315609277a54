"""Pytest fixtures for the fake Anthropic API (loaded by tests/conftest.py).

- `fake_anthropic`: a FakeAnthropicServer in this process, with
  ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY pointing at it for the test.
- `spawn_fake_anthropic(...)`: the same server as a separate process (for code
  under test that runs elsewhere, like the real Claude Code CLI); yields
  (base_url, process); read its log with `requests_of(base_url)`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer

ROOT = Path(__file__).resolve().parents[2]
FAKE_API_KEY = "sk-ant-fake-test-key"


@pytest.fixture
def fake_anthropic(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicServer]:
    server = FakeAnthropicServer().start()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_API_KEY)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def spawn_fake_anthropic(
    workdir: Path, *, script: Path | None = None, log_file: Path | None = None, timeout: float = 15.0
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run `python -m tests.fakes.anthropic_server` until the block ends."""
    port_file = Path(workdir) / "fake-anthropic.port"
    port_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "tests.fakes.anthropic_server", "--port-file", str(port_file)]
    if script:
        command += ["--script", str(script)]
    if log_file:
        command += ["--log-file", str(log_file)]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            if process.poll() is not None:
                raise RuntimeError(f"fake Anthropic server exited: {process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("fake Anthropic server did not start in time")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{int(port_file.read_text())}", process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def requests_of(base_url: str) -> list[dict[str, Any]]:
    """The request log of a fake server (in-process or spawned)."""
    with urllib.request.urlopen(f"{base_url}/_fake/requests", timeout=10) as response:
        return json.loads(response.read())["requests"]


def enqueue_replies(base_url: str, *replies: Any) -> None:
    """Queue replies (in `Reply.from_obj` form) on a fake server."""
    request = urllib.request.Request(
        f"{base_url}/_fake/replies", data=json.dumps(list(replies)).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    urllib.request.urlopen(request, timeout=10).read()
