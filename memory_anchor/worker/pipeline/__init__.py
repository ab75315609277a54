"""The pipeline: captured events become records.

`drain` takes events from the inbox in order, `sessions` keeps each session's
row, branch and summary, `compress/` distils tool uses into observations (Claude,
else the local path), `observations` turns a draft into a record; then the new
records are indexed.

Layer rule (docs/architecture.md): may import branching/, memory/ and the layers below them.
"""
