"""Git for memory: branches, diffs, merges, snapshots, session branches.

- `branches.py`  the branch registry (create/list/archive/delete)
- `snapshots.py` named (branch, seq) points for time travel
- `sessions.py`  which branch a session writes to
- `diff.py`      what two branches changed since they last shared a version
- `merge.py`     applying a diff with a strategy, atomically, with history
- `judge.py`     deciding conflicts with Claude when a key is set
- `service.py`   BranchService: the engine as the API, CLI and MCP tools use it

Layer rule (docs/architecture.md): may import memory/ and the layers below it.
"""
