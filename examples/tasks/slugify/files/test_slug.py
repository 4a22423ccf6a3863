import unittest

from slug import slugify


class SlugifyTest(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_runs_and_edges(self):
        self.assertEqual(slugify("  --Many   spaces__and_symbols!!  "), "many-spaces-and-symbols")

    def test_digits_and_empty(self):
        self.assertEqual(slugify("Python 3.12"), "python-3-12")
        self.assertEqual(slugify("!!!"), "")


if __name__ == "__main__":
    unittest.main()
