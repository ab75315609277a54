"""One virtual environment made per test session, copied wherever a test starts from an environment
that a first attempt already left behind.

`python -m venv` costs seconds of CPU each time (ensurepip installs pip into it: 4.5 s of CPU
measured on this 2-core machine); a copy costs a fraction of that. The build from nothing stays
tested: the first build of tests/test_hook_bootstrap.py and tests/e2e's first run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# The Python this suite runs on, outside its own virtual environment (as a user's python3 would be).
BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def make_venv(directory: Path) -> Path:
    """A new virtual environment with pip, as the bootstrap's `python -m venv` makes it."""
    subprocess.run([BASE_PYTHON, "-m", "venv", str(directory)], check=True, capture_output=True, timeout=600)
    return directory


def copy_venv(template: Path, target: Path) -> Path:
    """`template` copied to `target`, its files hard-linked (a copy where links cannot be made).

    pip never writes a file in place (it writes a new one and renames it over, or unlinks), nor
    does Python's .pyc cache, so what a test installs into the copy never reaches the template.
    A venv names no path of its own in what the bootstrap runs (`<env>/bin/python -m pip`):
    its interpreter is a symlink to BASE_PYTHON and pyvenv.cfg points at BASE_PYTHON's home.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, target, symlinks=True, copy_function=link_or_copy)
    return target


def link_or_copy(source: str, destination: str) -> None:
    """A hard link, costing no copy; a copy across file systems."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
