"""`MemoryPool`: one shared pool of memories over a Qdrant engine; which memories a search may return
(`filter`: SearchFilter), how a memory becomes a point, how a search is ranked, the pool's files (export / import)."""
