"""`PoolStore`: a LangGraph `BaseStore` on the pool's Qdrant engines."""
