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
    """`template` copied to `target` (a real copy: pip may change the copy, never the template).

    A venv names no path of its own in what the bootstrap runs (`<env>/bin/python -m pip`):
    its interpreter is a symlink to BASE_PYTHON and pyvenv.cfg points at BASE_PYTHON's home.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, target, symlinks=True)
    return target
