"""Evaluation harness: task suites, the three-phase protocol, pass@k, results store, reports.

Kept import-light: ``mtl_graph.bench.commands`` is imported by the CLI at start-up.
"""
