"""Git for memory: branches, diffs, merges, snapshots, session branches.

The branch registry (create/list/archive/delete) and named (branch, seq) points for time
travel are tables: `store/branches.py`, `store/snapshots.py`.

- `sessions.py`  which branch a session writes to
- `diff.py`      what two branches changed since they last shared a version
- `merge.py`     applying a diff with a strategy, atomically, with history
- `judge.py`     deciding conflicts with Claude when a key is set
- `service.py`   BranchService: the engine as the API, CLI and MCP tools use it

Layer rule (docs/architecture.md): may import memory/ and the layers below it.
"""
