"""The Claude Code versions the plugin supports, and what `memory-anchor doctor` says of the user's.

The range starts at `memory_anchor.core.claude_code.OLDEST_SUPPORTED`, the e2e suite's
oldest pin, and README says so. The doctor reads `claude --version` of the
`claude` on PATH (the real pinned CLIs here) and the plugins the real CLI
installed into a HOME, where another enabled plugin named memory-anchor leaves
one of the two without its hooks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from memory_anchor.core import claude_code
from tests.e2e.harness import PINS, claude_or_skip, copy_plugin, pinned_cli

ROOT = Path(__file__).resolve().parents[1]


def test_the_oldest_supported_version_is_the_oldest_pin_and_readme_says_the_range():
    assert pinned_cli("oldest").version == claude_code.OLDEST_SUPPORTED
    readme = ROOT.joinpath("README.md").read_text()
    stated = re.search(r"Claude Code (\d+\.\d+\.\d+) and later \(tested with (\d+\.\d+\.\d+) and (\d+\.\d+\.\d+)\)", readme)
    assert stated, "README must state the supported range"
    assert stated.groups() == (claude_code.OLDEST_SUPPORTED, pinned_cli("oldest").version, pinned_cli("newest").version)


def test_versions_compare_as_numbers():
    assert claude_code.version_key("2.1.332 (Claude Code)") == (2, 1, 332)
    assert claude_code.is_supported("2.1.197") and claude_code.is_supported("2.1.332") and claude_code.is_supported("2.10.0")
    assert not claude_code.is_supported("2.1.99") and not claude_code.is_supported("1.9.999")
    assert claude_code.version_key("Claude Code") is None and not claude_code.is_supported("unknown")


def doctor(tmp_path: Path, home: Path, path: str) -> list[str]:
    """The doctor's lines about Claude Code, run as a user runs it (plugin files, any python3)."""
    env = {"HOME": str(home), "PATH": path}
    done = subprocess.run(["python3", "-S", str(ROOT / "memory_anchor" / "hookkit" / "doctor.py"), "--data-dir", str(tmp_path / "data")],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = done.stdout.splitlines()
    return [line + (" " + lines[i + 1].strip() if line.startswith("FAIL") else "")
            for i, line in enumerate(lines) if "claude code:" in line]  # fmt: skip


@pytest.mark.parametrize("pin", PINS)
def test_doctor_reports_the_installed_claude_code(tmp_path, pin):
    cli = pinned_cli(pin)
    claude = claude_or_skip(pin)
    lines = doctor(tmp_path, tmp_path, f"{claude.parent}:/usr/bin:/bin")
    assert lines == [f"ok    claude code: Claude Code {cli.version} ({claude}; supported: {claude_code.OLDEST_SUPPORTED} and later)"]


def test_doctor_warns_about_a_claude_code_older_than_supported(tmp_path):
    # An older release than both pins: the suite installs nothing at run time, so this
    # `claude` answers --version as Claude Code 2.1.150 did ("<version> (Claude Code)").
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text('#!/bin/sh\necho "2.1.150 (Claude Code)"\n')
    (bin_dir / "claude").chmod(0o755)
    [line] = doctor(tmp_path, tmp_path, f"{bin_dir}:/usr/bin:/bin")
    assert line.startswith("FAIL  claude code: Claude Code 2.1.150")
    assert f"older than the oldest this plugin supports ({claude_code.OLDEST_SUPPORTED})" in line
    assert line.endswith("fix: update Claude Code: claude update")


def test_doctor_warns_when_another_enabled_plugin_is_named_memory_anchor(tmp_path):
    """Installed by the real CLI: ours, then someone else's plugin whose manifest takes our name
    (its marketplace calls it differently: Claude Code goes by the manifest)."""
    claude = claude_or_skip("newest")
    home = tmp_path / "home"
    home.mkdir()
    other = tmp_path / "other"
    (other / ".claude-plugin").mkdir(parents=True)
    (other / ".claude-plugin" / "marketplace.json").write_text(json.dumps(
        {"name": "someone-else", "owner": {"name": "x"}, "plugins": [{"name": "anchor-notes", "source": "./"}]}))
    (other / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "memory-anchor", "version": "9.9.9"}))
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"}  # fmt: skip

    def claude_says(*args: str) -> None:
        done = subprocess.run([str(claude), *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    claude_says("plugin", "marketplace", "add", str(copy_plugin(tmp_path / "clone")))
    claude_says("plugin", "install", "memory-anchor@memory-anchor")
    path = f"{claude.parent}:/usr/bin:/bin"
    assert not any(line.startswith("FAIL") for line in doctor(tmp_path, home, path))  # ours alone: nothing to say

    claude_says("plugin", "marketplace", "add", str(other))
    claude_says("plugin", "install", "anchor-notes@someone-else")
    [fail] = [line for line in doctor(tmp_path, home, path) if line.startswith("FAIL")]
    assert ("2 enabled plugins are named memory-anchor: memory-anchor@memory-anchor, anchor-notes@someone-else; "
            "Claude Code runs the hooks of the first only (memory-anchor@memory-anchor)") in fail
    assert "claude plugin disable <the others> (here: anchor-notes@someone-else)" in fail

    claude_says("plugin", "disable", "anchor-notes@someone-else")
    assert not any(line.startswith("FAIL") for line in doctor(tmp_path, home, path))
    assert os.path.isdir(home / ".claude" / "plugins" / "cache" / "someone-else")  # still installed, only disabled
