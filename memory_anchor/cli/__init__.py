"""The `memory-anchor` command line: one module per command group."""
