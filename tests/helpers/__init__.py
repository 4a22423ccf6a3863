"""Helpers the tests share: corpora, fixtures, fake models, attack kits (importable as `helpers.<module>`)."""
