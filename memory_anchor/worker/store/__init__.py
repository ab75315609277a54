"""The store: the one door to storage.

SQLite connections, pragmas and migrations, `postgres/` for team memory on
PostgreSQL (schema, roles, row-level security, the pooled database, the
team database that may be away, the migration between the two), `errors`
(storage unusable or out of reach, without a driver import), the dialect seam
between the two, the versioned `records` table, and what reads
or writes storage whole: mem0 filters compiled to SQL, group commit, the
quarantine, export/import, a row's wire form, atomic file writes.

Layer rule (docs/architecture.md): may import nothing else of the worker.
"""
