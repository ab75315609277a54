"""The index: finding records by meaning and by words.

Offline embeddings (int8 MiniLM), the vector store (Chroma on disk, a compact
index in memory), the indexer that feeds it, and hybrid search (dense + BM25,
dates named in queries).

Layer rule (docs/architecture.md): may import store/.
"""
