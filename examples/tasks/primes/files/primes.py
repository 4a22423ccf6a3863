def primes_up_to(n: int) -> list[int]:
    raise NotImplementedError
