"""The online loop's side of the pool: utility and re-ranking (`policy`), credit, quarantine, release and retrieval
(`ops`: PoolLifecycle, which each pool holds as `pool.lifecycle`), what it needs of a pool (`protocol`), the
relevance floor, consolidation and pruning."""
