"""Team memory on PostgreSQL: the same store, a shared database.

`schema` creates and upgrades the tables, roles and row-level security (run
once by the database owner, `memory-anchor storage init`); `roles` adds
members; `connect` opens connections with errors a person can act on;
`database` is `PostgresDatabase`, the `Database` contract on a connection
pool; `team` is `TeamDatabase`, the worker's handle that may be away (opened
on first use and again after an outage); `migrate` copies a memory between
SQLite and a team database (`memory-anchor storage migrate`); `placeholders`
lets the store's `?` SQL run on psycopg.

Part of the store layer (docs/architecture.md): imports nothing above it.
"""
