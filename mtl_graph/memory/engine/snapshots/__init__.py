"""Pool snapshots: a point-exact copy of a pool (`archive`), in the format `format` defines."""
