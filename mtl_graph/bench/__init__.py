"""Evaluation harness: task suites, the three-phase protocol, pass@k, results store, reports.

Its commands (``mtl eval``, ``mtl report``, ``mtl eval-learning``, ``mtl eval-baselines``) are in
``mtl_graph/cli/evaluation.py``, which calls these modules; nothing here imports the CLI.
"""
