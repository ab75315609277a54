"""L1 active_context: per-session working memory, in the worker's memory only.

"What am I thinking about right now": key/value pairs per (session, agent),
each with a TTL (default one hour). Nothing here is persisted: a worker restart
forgets it, by design: it is scratch space, and what matters is kept as events. When a session ends, `end_session`
hands back what is left so that it can be kept as an L2 event.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from memory_anchor.worker.memory.common import DEFAULT_AGENT
from memory_anchor.worker.store.records import RecordError

DEFAULT_TTL_SECONDS = 3600
MAX_KEYS_PER_SESSION = 200
MAX_VALUE_CHARS = 20_000


class ActiveContext:
    def __init__(self, default_ttl: int = DEFAULT_TTL_SECONDS, clock=time.monotonic):
        self.default_ttl = default_ttl
        self._clock = clock
        self._lock = threading.Lock()
        # (session_id, agent_id) -> key -> (value, expires_at, set_at_wall)
        self._slots: dict[tuple[str, str], dict[str, tuple[Any, float, float]]] = {}

    def set(self, session_id: str, key: str, value: Any, *, ttl_seconds: int | None = None, agent_id: str | None = None) -> dict[str, Any]:
        try:
            encoded = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            raise RecordError("active context values must be JSON", code="invalid_request")
        if len(encoded) > MAX_VALUE_CHARS:
            raise RecordError(f"an active context value is at most {MAX_VALUE_CHARS} characters of JSON", code="too_large")
        ttl = ttl_seconds or self.default_ttl
        slot_key = (session_id, agent_id or DEFAULT_AGENT)
        with self._lock:
            slot = self._live_slot(slot_key)
            if key not in slot and len(slot) >= MAX_KEYS_PER_SESSION:
                raise RecordError(f"a session's active context holds at most {MAX_KEYS_PER_SESSION} keys", code="too_large")
            slot[key] = (value, self._clock() + ttl, time.time())
            self._slots[slot_key] = slot
        return {"session_id": session_id, "key": key, "value": value, "ttl_seconds": ttl}

    def get(self, session_id: str, key: str | None = None, *, agent_id: str | None = None) -> dict[str, Any]:
        """All live keys of a session (or one key), as {key: value}."""
        with self._lock:
            slot = self._live_slot((session_id, agent_id or DEFAULT_AGENT))
            values = {k: v[0] for k, v in slot.items()}
        if key is not None:
            return {key: values[key]} if key in values else {}
        return values

    def delete(self, session_id: str, key: str, *, agent_id: str | None = None) -> bool:
        with self._lock:
            slot = self._slots.get((session_id, agent_id or DEFAULT_AGENT), {})
            return slot.pop(key, None) is not None

    def end_session(self, session_id: str, *, agent_id: str | None = None) -> dict[str, Any]:
        """Forget a session's working memory, returning what was still live."""
        with self._lock:
            slot = self._live_slot((session_id, agent_id or DEFAULT_AGENT))
            self._slots.pop((session_id, agent_id or DEFAULT_AGENT), None)
        return {k: v[0] for k, v in slot.items()}

    def sweep(self) -> int:
        """Drop expired keys and empty sessions; returns how many keys went."""
        dropped = 0
        with self._lock:
            for slot_key in list(self._slots):
                before = len(self._slots[slot_key])
                slot = self._live_slot(slot_key)
                dropped += before - len(slot)
                if not slot:
                    self._slots.pop(slot_key, None)
        return dropped

    def _live_slot(self, slot_key: tuple[str, str]) -> dict[str, tuple[Any, float, float]]:
        now = self._clock()
        slot = {k: v for k, v in self._slots.get(slot_key, {}).items() if v[1] > now}
        if slot_key in self._slots:
            self._slots[slot_key] = slot
        return slot


def describe(values: dict[str, Any]) -> str:
    """Working memory as one line per key, for the event written at session end."""
    lines = []
    for key, value in values.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"- {key}: {shown}")
    return "Working memory at session end:\n" + "\n".join(lines)
