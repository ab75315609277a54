"""The README, the manual and --help describe what the product does."""

from __future__ import annotations

import subprocess
import sys

from memory_anchor.cli.main import COMMAND_MODULES, build_parser
from memory_anchor.schemas.settings import Settings
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
GUIDE = (ROOT / "docs" / "guide.md").read_text()


def test_readme_opens_with_the_two_commands_then_install_then_what_happens_next():
    head = README[: README.index("## Use it in Claude Code")]
    assert "make run" in head and "make test" in head and ".venv/bin/memory-anchor" in head
    assert README.index("## Use it in Claude Code") < README.index("## What happens next") < README.index("## More")
    for command in ("memory-anchor import-history", "memory-anchor viewer", "memory-anchor doctor", "memory-anchor briefing"):
        assert command in README[README.index("## What happens next"):], command


def test_every_link_of_the_readme_and_the_manual_leads_somewhere():
    import re

    for source, text in ((ROOT / "README.md", README), (ROOT / "docs" / "guide.md", GUIDE)):
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if "://" not in target:
                assert (source.parent / target).exists(), f"{source.name} links to a missing {target}"


def test_the_manual_documents_every_setting():
    missing = [name for name in Settings.model_fields if f"`{name}`" not in GUIDE]
    assert not missing, f"settings missing from the manual's table (docs/guide.md): {missing}"


def test_the_manual_lists_every_command_group():
    parser = build_parser()
    groups = next(a for a in parser._actions if a.dest == "command").choices
    missing = [name for name in groups if f"memory-anchor {name}" not in GUIDE]
    assert not missing, f"commands missing from the manual (docs/guide.md): {missing}"
    assert len(groups) >= len(COMMAND_MODULES)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_help_runs():
    result = subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and "worker" in result.stdout
