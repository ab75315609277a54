"""Memory Anchor: long-term memory for AI coding agents.

`from memory_anchor import Memory, AsyncMemory` gives mem0's Memory interface
over the worker (see memory_anchor/client/sdk.py). They are imported on first use:
hooks import this package on every event and must stay fast.
"""

from memory_anchor.core.version import __version__
__all__ = ["Memory", "AsyncMemory", "__version__"]


def __getattr__(name: str):
    if name in ("Memory", "AsyncMemory"):
        from memory_anchor.client import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'memory_anchor' has no attribute {name!r}")
