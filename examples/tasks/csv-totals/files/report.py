def totals(path: str) -> dict[str, float]:
    raise NotImplementedError
