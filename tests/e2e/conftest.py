"""The Claude Code CLI an end-to-end test drives.

`claude_cli` runs a test once with each pinned CLI (tests/e2e/cli/<pin>): the
oldest the plugin supports and the newest release. A test whose behaviour does
not depend on Claude Code's version runs on the newest only, with
`@pytest.mark.parametrize("claude_cli", ["newest"], indirect=True)` and a word on why.
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import PINS, ClaudeCli, ensure_claude_installed, pinned_cli


@pytest.fixture(params=PINS)
def claude_cli(request) -> ClaudeCli:
    ensure_claude_installed(request.param)
    return pinned_cli(request.param)
