"""Evaluation harness: task suites, the three-phase protocol, pass@k, results store, reports.

Its commands are in ``mtl_graph/cli/evaluation.py``.
"""
