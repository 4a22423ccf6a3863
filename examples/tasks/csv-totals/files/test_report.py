import unittest

from report import totals


class TotalsTest(unittest.TestCase):
    def test_sales(self):
        self.assertEqual(totals("sales.csv"), {"books": 19.75, "games": 30.01, "music": 0.3})


if __name__ == "__main__":
    unittest.main()
