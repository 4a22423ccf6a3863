"""Redaction: leaked / kept counts on the generated secret corpus, and speed of the full and the fast path.

    python benchmarks/redaction.py [--seeds 20] [--size-mb 20]

Speed is measured on generated agent logs (tests/helpers/agent_log.py: source files, pytest / pip / git / compiler
output, tracebacks, JSON tool calls, env dumps, with the corpus' look-alikes and secrets mixed in at a realistic and an
adversarial rate) and on a trajectory cut into ~3 KB observations (what `mtl ingest` redacts). Both paths run in
the same process on the same text; the table says whether their outputs are identical.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.agent_log import agent_log  # noqa: E402
from helpers.secret_corpus import secret_cases  # noqa: E402
from helpers.secret_look_alikes import look_alikes  # noqa: E402

from mtl_graph.redaction.redact import Redactor, redact  # noqa: E402
from mtl_graph.core.trajectory import Step, Trajectory  # noqa: E402
from mtl_graph.core.task import TaskRef  # noqa: E402


def corpus_counts(seeds: int) -> tuple[int, int, int, int, int]:
    """(secrets, leaked, cases changed beyond the secret, look-alikes, look-alikes damaged) over `seeds` draws."""
    secrets = leaked = collateral = kept_total = damaged = 0
    for seed in range(seeds):
        for case in secret_cases(seed):
            out = redact(case.text)
            secrets += len(case.secrets)
            leaked += sum(s in out for s in case.secrets)
            expected = case.text
            for s in case.secrets:
                expected = expected.replace(s, "")
            collateral += _unmarked(out) != expected
        for item in look_alikes(seed):
            kept_total += 1
            damaged += redact(item.text) != item.text
    return secrets, leaked, collateral, kept_total, damaged


def _unmarked(text: str) -> str:
    return re.sub(r"\[REDACTED:[\w-]+\]", "", text)


def _timed(fn, arg) -> tuple[float, object]:
    """(CPU seconds of this process, result): one core's work, whatever else the machine runs."""
    start = time.process_time()
    out = fn(arg)
    return time.process_time() - start, out


def speed_rows(size: int) -> list[tuple[str, float, float, bool, int]]:
    """(input, full-path MB/s, fast-path MB/s, same output, markers) for each input of about `size` characters."""
    full, fast = Redactor(fast=False), Redactor()
    # Compiles the pre-scan database and loads the word list (once per process, about 50 ms).
    fast.redact("warm up: LEGACY_SETTING=AbstractSingletonProxyFactoryBean2")
    rows = []
    for mix in ("realistic", "adversarial"):
        log = agent_log(size, seed=1, mix=mix)
        t_full, out_full = _timed(full.redact, log)
        t_fast, out_fast = _timed(fast.redact, log)
        rows.append((f"{mix} log, one text", len(log) / t_full / 1e6, len(log) / t_fast / 1e6, out_full == out_fast,
                     out_fast.count("[REDACTED:")))
    # What ingest redacts: a trajectory of ~3 KB observations, one redaction per field.
    log = agent_log(size, seed=2)
    steps = [Step(action="cat file", observation=log[i:i + 3000]) for i in range(0, len(log), 3000)]
    run = Trajectory(task=TaskRef(id="bench", instruction="fix the bug"), steps=steps)
    t_full, out_full = _timed(full.redact_trajectory, run)
    t_fast, out_fast = _timed(fast.redact_trajectory, run)
    rows.append((f"trajectory, {len(steps):,} steps", len(log) / t_full / 1e6, len(log) / t_fast / 1e6,
                 out_full == out_fast, out_fast.model_dump_json().count("[REDACTED:")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="corpus draws to count over")
    parser.add_argument("--size-mb", type=float, default=20.0, help="size of each input to time")
    args = parser.parse_args()
    secrets, leaked, collateral, kept_total, damaged = corpus_counts(args.seeds)
    print(f"corpus: {len(secret_cases())} secret shapes x {args.seeds} draws = {secrets} secrets, {leaked} leaked, "
          f"{collateral} redactions beyond the secret; {kept_total} look-alikes, {damaged} damaged")
    cases = secret_cases()
    as_json = redact(json.dumps([{"observation": c.text} for c in cases]))
    print(f"corpus as one JSON log line: {sum(s in as_json for c in cases for s in c.secrets)} of "
          f"{sum(len(c.secrets) for c in cases)} secrets leaked")
    rows = speed_rows(int(args.size_mb * 1_000_000))
    engine = Redactor()._prescan.engine
    print(f"\nspeed, MB of text per CPU second (one core), {args.size_mb:g} MB each; pre-scan engine: {engine}")
    print(f"| input | full path (every rule, whole text) | fast path (pre-scan) | speed-up | same output | markers |")
    print("|---|---|---|---|---|---|")
    for name, full, fast, same, markers in rows:
        print(f"| {name} | {full:.2f} | {fast:.2f} | {fast / full:.0f}x | {'yes' if same else 'NO'} | {markers:,} |")


if __name__ == "__main__":
    main()
