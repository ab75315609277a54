"""What happens to a hook payload before it is stored anywhere, even the inbox.

Oversized fields are truncated (with a marker saying how much was cut), secrets
are redacted and `<private>` spans dropped, so nothing secret or huge reaches disk.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.core.redact import sanitize
from memory_anchor.schemas.settings import Settings


def sanitize_event(payload: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """A cleaned copy of `payload`; identifiers Claude Code sends are left intact."""
    return sanitize(payload, settings.max_tool_output_chars)
