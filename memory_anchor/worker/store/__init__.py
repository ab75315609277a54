"""The store: the one door to storage.

SQLite connections, pragmas and migrations, `postgres/` for team memory on
PostgreSQL (schema, roles, row-level security, the pooled database, the
team database that may be away, the migration between the two), `errors`
(storage unusable or out of reach, without a driver import), the dialect seam
between the two, the versioned `records` table, and what reads
or writes storage whole: mem0 filters compiled to SQL, group commit, the
quarantine, export/import, a row's wire form, atomic file writes. Every other
table has a module of named operations here (sessions, inbox, branches,
snapshots, merges, conflicts, approvals, open_items, forgotten, event_archive,
llm_usage, pending_vectors, vectors), and keyword search and thread walks keep
their per-dialect SQL here too: no statement runs outside this package.

Layer rule (docs/architecture.md): may import nothing else of the worker.
"""
