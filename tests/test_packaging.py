"""What `pip install` of the project puts into site-packages: one package, `memory_anchor`."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conftest import ROOT


def test_pip_install_puts_exactly_one_top_level_package(tmp_path):
    # A copy of what the package is built from: an in-process build writes build/ into its source.
    source, target = tmp_path / "source", tmp_path / "site-packages"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "memory_anchor", source / "memory_anchor", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(source)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    top = sorted(p.name for p in target.iterdir() if p.name != "bin" and not p.name.endswith(".dist-info"))
    assert top == ["memory_anchor"]
    # The worker's data and the viewer travel with it; nothing of the checkout's tests does.
    assert (target / "memory_anchor" / "worker" / "data" / "tokenizer.json").is_file()
    assert (target / "memory_anchor" / "worker" / "static" / "viewer.js").is_file()
    assert not list(target.rglob("conftest.py"))
