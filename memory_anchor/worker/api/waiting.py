"""Bounded waits for the pipeline, for the few requests whose answer depends on events
still in the inbox (a fork's branch, a resumed session's briefing)."""

from __future__ import annotations

import asyncio
from typing import Callable

# How often a waiting request looks again: one indexed inbox query each time.
POLL = 0.02


async def wait_while(still_waiting: Callable[[], bool], timeout: float) -> bool:
    """Until `still_waiting()` is false (True) or `timeout` seconds passed (False)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while still_waiting():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(POLL)
    return True
