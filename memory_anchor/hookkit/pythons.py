"""Find a Python (3.10+, with venv) to build the plugin's environment with.

The hooks run as `python3`, and on a Mac that is often the Command Line
Tools' Python 3.9 while a newer one sits beside it (Homebrew, pyenv, uv, the
python.org installer). The worker needs 3.10+, so the bootstrap looks, in order:

1. the `python` setting (`settings.json`): the user's explicit choice;
2. the interpreter running the bootstrap (the hooks' `python3`), if new enough;
3. `python3.13` ... `python3.10` on PATH, then in the usual install places;
4. `uv`, which finds (or downloads) a managed Python.

Newest first among 3.13 ... 3.10: every dependency ships wheels for them. A
candidate counts only if it runs and has `venv` and `ensurepip` (Debian's
python3 lacks them without the python3-venv package).

Runs in the detached bootstrap and in `doctor`, never on a hook's fast path;
it must stay importable by Python 3.9 (and fail readably on older ones).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

MINIMUM = (3, 10)
PREFERRED = ("3.13", "3.12", "3.11", "3.10")
# uv installs this one when no Python on the machine fits.
UV_VERSION = "3.12"

# Probed with each candidate: its version, and whether it can make a venv with pip.
_PROBE = (
    "import sys\n"
    "try:\n"
    "    import venv, ensurepip\n"
    "    ok = 1\n"
    "except Exception:\n"
    "    ok = 0\n"
    "print('%d.%d %d' % (sys.version_info[0], sys.version_info[1], ok))\n"
)


class Candidate:
    """An interpreter that was probed: where it is, its version, and how it was found."""

    __slots__ = ("path", "version", "has_venv", "how")

    def __init__(self, path: str, version: tuple, has_venv: bool, how: str):
        self.path = path
        self.version = version
        self.has_venv = has_venv
        self.how = how

    @property
    def fits(self) -> bool:
        return self.version >= MINIMUM and self.has_venv

    @property
    def version_text(self) -> str:
        return "%d.%d" % self.version

    def __repr__(self) -> str:
        return f"Candidate({self.path!r}, {self.version_text}, venv={self.has_venv}, {self.how})"


class NoPython(Exception):
    """No interpreter fits; `problem` and `fix` are for the user, one short clause each."""

    def __init__(self, problem: str, fix: str, seen: list):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.seen = seen


def probe(path: str, how: str) -> Candidate | None:
    """Run `path` once to learn its version; None when it does not run."""
    try:
        result = subprocess.run(
            [path, "-I", "-c", _PROBE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, timeout=20, universal_newlines=True,
        )  # fmt: skip
        major, minor = result.stdout.split()[0].split(".")
        ok = result.stdout.split()[1] == "1"
        return Candidate(path, (int(major), int(minor)), ok, how)
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def install_places() -> list[str]:
    """Directories where Pythons live outside PATH: Homebrew, python.org, pyenv, uv."""
    home = os.path.expanduser("~")
    places = ["/opt/homebrew/bin", "/usr/local/bin"]
    for version in PREFERRED:
        places.append(f"/opt/homebrew/opt/python@{version}/bin")
        places.append(f"/usr/local/opt/python@{version}/bin")
        places.append(f"/Library/Frameworks/Python.framework/Versions/{version}/bin")
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.join(home, ".pyenv")
    places += sorted(glob.glob(os.path.join(pyenv_root, "versions", "*", "bin")), reverse=True)
    uv_root = os.environ.get("UV_PYTHON_INSTALL_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"), "uv", "python"
    )
    places += sorted(glob.glob(os.path.join(uv_root, "cpython-3.*", "bin")), reverse=True)
    places.append(os.path.join(home, ".local", "bin"))  # `uv python install --default`
    return places


def _python_names() -> list[str]:
    return [f"python{v}" for v in PREFERRED]


def find_uv() -> str | None:
    home = os.path.expanduser("~")
    found = shutil.which("uv")
    if found:
        return found
    for place in (os.path.join(home, ".local", "bin"), os.path.join(home, ".cargo", "bin"), "/opt/homebrew/bin", "/usr/local/bin"):
        path = os.path.join(place, "uv")
        if os.access(path, os.X_OK):
            return path
    return None


def setting_python(data_dir: str) -> str:
    """The `python` setting from settings.json (empty when unset); read with json, not pydantic."""
    import json

    try:
        with open(os.path.join(data_dir, "settings.json"), encoding="utf-8") as handle:
            value = json.load(handle).get("python")
    except (OSError, ValueError, AttributeError):
        return ""
    return value.strip() if isinstance(value, str) else ""


def candidates(data_dir: str, current: str | None = None):
    """Yield probed interpreters in order of preference (see the module docstring), without uv."""
    seen_paths = set()

    def once(path: str, how: str):
        key = os.path.realpath(path)
        if key in seen_paths or not os.access(path, os.X_OK):
            return None
        seen_paths.add(key)
        return probe(path, how)

    current = current or sys.executable
    if current:
        found = once(current, "the hooks' python3")
        if found is not None:
            yield found
    for name in _python_names():
        path = shutil.which(name)
        if path:
            found = once(path, "PATH")
            if found is not None:
                yield found
    for place in install_places():
        for name in _python_names() + ["python3"]:
            path = os.path.join(place, name)
            if os.path.exists(path):
                found = once(path, place)
                if found is not None:
                    yield found


def fix_command() -> str:
    """How a user on this platform gets a Python that fits."""
    if sys.platform == "darwin":
        return "brew install python@3.12"
    if find_uv():
        return f"uv python install {UV_VERSION}"
    return f"install Python 3.10+, e.g. with uv python install {UV_VERSION}"


def choose(data_dir: str, current: str | None = None, log=None) -> Candidate:
    """The interpreter to build the environment with; raises NoPython with the reason and fix.

    `uv` is only asked when nothing on the machine fits, since it may download.
    """
    log = log or (lambda message: None)
    explicit = setting_python(data_dir)
    if explicit:
        path = shutil.which(explicit) or explicit
        found = probe(path, "the python setting") if os.access(path, os.X_OK) else None
        if found is not None and found.fits:
            return found
        what = "does not run" if found is None else (
            f"is Python {found.version_text}" if found.version < MINIMUM else "has no venv module")  # fmt: skip
        raise NoPython(
            f"the `python` setting names {explicit}, which {what}",
            f"set \"python\" in {os.path.join(data_dir, 'settings.json')} to a Python 3.10+",
            [found] if found else [],
        )
    seen = []
    for candidate in candidates(data_dir, current):
        seen.append(candidate)
        log(f"found {candidate.path}: Python {candidate.version_text}{'' if candidate.has_venv else ' without venv/ensurepip'}")
        if candidate.fits:
            return candidate
    uv = find_uv()
    if uv:
        found = uv_python(uv, log)
        if found is not None and found.fits:
            return found
    newest = max(seen, key=lambda c: c.version) if seen else None
    if newest is not None and newest.version >= MINIMUM:
        raise NoPython(
            f"Python {newest.version_text} has no venv module",
            f"sudo apt install python{newest.version_text}-venv",
            seen,
        )
    found_text = f"found {newest.version_text}" if newest else "found none"
    raise NoPython(f"it needs Python 3.10+, {found_text}", fix_command(), seen)


def uv_python(uv: str, log) -> Candidate | None:
    """A Python 3.10+ that uv knows, installing its managed one when it has none."""
    for attempt in ("find", "install"):
        if attempt == "install":
            log(f"$ {uv} python install {UV_VERSION}")
            try:
                subprocess.run([uv, "python", "install", UV_VERSION], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)  # fmt: skip
            except (OSError, subprocess.SubprocessError) as exc:
                log(f"uv python install failed: {exc!r}")
                return None
        try:
            result = subprocess.run([uv, "python", "find", ">=3.10"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=60,
                                    universal_newlines=True)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        path = result.stdout.strip().splitlines()[-1] if result.returncode == 0 and result.stdout.strip() else ""
        if path:
            found = probe(path, "uv")
            if found is not None and found.fits:
                return found
    return None
