"""The cognitive memory model (docs/memory-model.md): L0 identity, L1 active context, L2 events,
L3 facts, L4 operational knowledge, plus approvals, conflicts, relations and
fact extraction. See docs/memory-model.md; `MemoryModel` is the entry point.

Layer rule (docs/architecture.md): may import index/, capture/, llm/ and store/.
"""

from memory_anchor.worker.memory.extraction import Material
from memory_anchor.worker.memory.model import MemoryModel

__all__ = ["MemoryModel", "Material"]
