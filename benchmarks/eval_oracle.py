"""Prove the evaluation harness with agents whose results are known, on the full HumanEval set.

    python benchmarks/eval_oracle.py [--limit N] [--concurrency N] [--out DIR]

The oracle submits every canonical solution (pass@1 must be 1.0), the no-op agent submits nothing (0.0).
Each run writes a normal results directory with its report.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from mtl_graph.bench.harness import run_eval
from mtl_graph.bench.records import EvalConfig
from mtl_graph.bench.passk import aggregate
from mtl_graph.bench.report import render_report
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.results import ResultStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="seeded sample of problems (default: all 164)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="parent of the results directories (default: temp)")
    args = parser.parse_args()
    parent = args.out or Path(tempfile.mkdtemp(prefix="mtl-eval-oracle-"))
    ok = True
    for runner, expected in ((OracleRunner(), 1.0), (NoopRunner(), 0.0)):
        out = parent / runner.name
        cfg = EvalConfig(suites=["humaneval"], runner=runner.name, formats=[], limit=args.limit)
        start = time.monotonic()
        summary = run_eval(cfg, runner, str(out), concurrency=args.concurrency)
        elapsed = time.monotonic() - start
        score = aggregate(ResultStore(out).results(), 1)[("humaneval", "zero_shot")]
        render_report(out)
        status = "ok" if score.pass_at_k == expected and not summary.errors else "MISMATCH"
        ok &= status == "ok"
        print(f"{runner.name:6s} pass@1 = {score.pass_at_k:.3f} on {score.tasks} problems "
              f"(expected {expected}) in {elapsed:.1f}s, {sum(summary.ran.values())} runs -> {status}; {out}/report.md")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
