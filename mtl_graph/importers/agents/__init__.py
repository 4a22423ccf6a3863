"""One module per log format, each registering its `Importer` (see `registry`): a new format is one module here,
and its test. The registry imports every module of this package (and nothing else) when it is first read."""
