"""The README and --help describe what the product does."""

from __future__ import annotations

import subprocess
import sys

from memory_anchor.cli.main import COMMAND_MODULES, build_parser
from memory_anchor.schemas.settings import Settings
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_two_commands():
    head = README[: README.index("## Install the plugin")]
    assert "make run" in head and "make test" in head


def test_readme_documents_every_setting():
    missing = [name for name in Settings.model_fields if f"`{name}`" not in README]
    assert not missing, f"settings missing from the README table: {missing}"


def test_readme_lists_every_command_group():
    parser = build_parser()
    groups = next(a for a in parser._actions if a.dest == "command").choices
    missing = [name for name in groups if f"memory-anchor {name}" not in README]
    assert not missing, f"commands missing from the README: {missing}"
    assert len(groups) >= len(COMMAND_MODULES)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_help_runs():
    result = subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and "worker" in result.stdout
