"""Qdrant Edge: the in-process shard, its HNSW index and the background rebuild."""
