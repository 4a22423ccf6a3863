import time
import unittest

from primes import primes_up_to


class PrimesTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(primes_up_to(1), [])
        self.assertEqual(primes_up_to(2), [2])
        self.assertEqual(primes_up_to(30), [2, 3, 5, 7, 11, 13, 17, 19, 23, 29])

    def test_large_and_fast(self):
        start = time.perf_counter()
        primes = primes_up_to(100_000)
        self.assertLess(time.perf_counter() - start, 1.0)
        self.assertEqual(len(primes), 9592)
        self.assertEqual(primes[-1], 99991)


if __name__ == "__main__":
    unittest.main()
