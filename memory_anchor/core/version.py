"""The package's version, on its own: the worker's lifecycle and the wire formats name it
without importing the package's lazy `Memory`/`AsyncMemory` door (memory_anchor/__init__.py)."""

__version__ = "0.2.0"
