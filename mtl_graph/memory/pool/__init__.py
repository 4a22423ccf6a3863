"""`MemoryPool`: one shared pool of memories over a Qdrant engine; how a memory becomes a point, how a search is
ranked, the pool's files (export / import)."""
