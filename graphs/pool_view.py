"""The pool view for LangGraph Studio (registered in langgraph.json): search and list the memory pool.

The pool (MTL_POOL) is opened on the first run, through the same process-wide handle the `mtl` graph uses."""

from mtl_graph.pipeline.pool_browser import build_pool_view

graph = build_pool_view()
