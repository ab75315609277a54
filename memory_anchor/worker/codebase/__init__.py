"""The code a memory is about: the git repository beside the project, its files' blob ids,
and whether a memory's files still hold what they held when it was written.

- `git.py`: which repository a path belongs to, its HEAD read from `.git` without a process,
  a file's blob id computed in Python, and the few history questions only git answers
  (commits since, renames), batched and bounded in time;
- `refs.py`: the files a record names, as `CodeRef`s to keep in `data.code`;
- `freshness.py`: `FreshnessChecker`, which compares a record's refs with the working tree.

Outside a repository, or with git missing, every answer is "unknown" and nothing changes.
"""
