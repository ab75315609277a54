"""Real git repositories in temporary directories, with commits at chosen times: the scripted
histories of `bench staleness` and the tests of memory_anchor/worker/codebase and next steps done by commits.

A commit's time is set (GIT_AUTHOR_DATE / GIT_COMMITTER_DATE) so a test says
"committed after the session" without waiting for the clock: git keeps whole
seconds, and a commit in the same second as the session would be ambiguous.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


class GitRepo:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.clock = time.time() + 60  # every scripted commit lands after anything recorded now
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, at: float | None = None) -> str:
        env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
               "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}  # fmt: skip
        if at is not None:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{int(at)} +0000"
        done = subprocess.run(["git", "-C", str(self.root), *args], env=env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
        return done.stdout.strip()

    def write(self, path: str, text: str) -> Path:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def commit(self, message: str, *, files: dict[str, str | None] | None = None) -> str:
        """Write (text) or delete (None) `files`, commit everything with `message`, a minute after the
        previous scripted commit; the new HEAD's sha."""
        for path, text in (files or {}).items():
            if text is None:
                self.git("rm", "-q", path)
            else:
                self.write(path, text)
        self.git("add", "-A")
        self.clock += 60
        self.git("commit", "-q", "--allow-empty", "-m", message, at=self.clock)
        return self.git("rev-parse", "HEAD")
