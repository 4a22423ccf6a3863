"""`python -m mtl_graph.cli`: the `mtl` command."""

from mtl_graph.cli import main

main()
