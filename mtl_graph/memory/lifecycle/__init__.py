"""The online loop's side of the pool: utility and re-ranking (`policy`), credit, quarantine and release
(`ops`), the relevance floor, consolidation and pruning."""
