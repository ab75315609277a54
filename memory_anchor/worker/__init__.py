"""The Memory Anchor worker: the one process that owns the stores."""
