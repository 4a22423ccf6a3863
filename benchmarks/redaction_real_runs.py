"""Redaction on real agent runs: what it takes out of public runs (over-redaction) and what it finds planted in them.

    PYTHONPATH=. python benchmarks/redaction_real_runs.py PATH [PATH ...] [--show N] [--dump FILE]

Each PATH is a local copy of public agent logs, read as `mtl ingest` reads them (the project's importers; the same
directories as `benchmarks/screening_real_runs.py`). Every run is redacted as ingest redacts it
(`Redactor.redact_trajectory`: the task text as text the agent was given, every step's reasoning, action,
arguments and output, the submission) and two things are counted per source format:

- over-redaction: the runs hold no secret of their own that we know of, so every marker is a candidate false
  positive. The table counts runs changed, markers and characters redacted; `--dump` writes every redacted string
  with its kind and the text around it, to read them one by one (a real leaked key in a public log would be a
  true positive, and is listed as such in the docs).
- under-redaction: each secret of the generated corpus (`tests/helpers/secret_corpus*.py`: vendor tokens,
  passwords in every syntax, DSNs, headers, private keys, base64-hidden values, Kubernetes and kubeconfig values,
  webhook URLs) is planted into the output of a step of a real run, at a random line, and the run is redacted
  again: a planted secret still there is a miss.

Measure one checkout against another by pointing PYTHONPATH at it (the texts and the corpus come from this one).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.secret_corpus import secret_cases  # noqa: E402
from helpers.secret_corpus_kube import round_three_cases  # noqa: E402
from helpers.secret_corpus_located import encoded_and_located_cases  # noqa: E402
from mtl_graph.core.trajectory import Trajectory  # noqa: E402
from mtl_graph.importers import load_many  # noqa: E402
from mtl_graph.redaction.redact import Redactor  # noqa: E402

MARKER = re.compile(r"\[REDACTED:([\w-]+)\]")


def texts_of(trajectory: Trajectory) -> list[tuple[str, str, bool]]:
    """(field, text, given) of every free text that `redact_trajectory` redacts (arguments' strings included)."""
    out = [("task", trajectory.task.instruction, True)]
    for step in trajectory.steps:
        out += [("reasoning", step.reasoning or "", False), ("action", step.action, False),
                ("observation", step.observation, False)]
        out += [("args", v, False) for v in _strings(step.args)]
    if trajectory.submission:
        out.append(("submission", trajectory.submission, False))
    return [t for t in out if t[1]]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def redacted_spans(text: str, out: str) -> list[tuple[str, str, int]]:
    """(kind, original string, offset) of each marker in out: the text between markers is kept verbatim, so each
    original is what lies between the kept pieces around its marker."""
    pieces = MARKER.split(out)  # kept, kind, kept, kind, ... kept
    spans, pos = [], len(pieces[0])
    for i in range(1, len(pieces), 2):
        after = pieces[i + 1]
        end = text.find(after, pos) if after else len(text)
        spans.append((pieces[i], text[pos:end], pos))
        pos = end + len(after)
    return spans


def over_redaction(runs, redactor: Redactor, dump) -> dict[str, Counter]:
    table: dict[str, Counter] = defaultdict(Counter)
    for run in runs:
        fmt = run.trajectory.source_format or "?"
        row = table[fmt]
        row["runs"] += 1
        changed = False
        start = time.process_time()
        for field, text, given in texts_of(run.trajectory):
            row["chars"] += len(text)
            out = redactor.redact(text, given=given)
            if out == text:
                continue
            changed = True
            for kind, original, at in redacted_spans(text, out):
                row["markers"] += 1
                row["redacted"] += len(original)
                row[f"kind:{kind}"] += 1
                if dump is not None:
                    context = text[max(0, at - 60):at + len(original) + 40].replace("\n", "\\n")
                    dump.write(f"{fmt}\t{run.path.name}\t{field}\t{kind}\t{original!r}\t{context}\n")
        row["cpu"] += time.process_time() - start
        row["changed"] += changed
    return table


def planted(runs, redactor: Redactor, seed: int) -> dict[str, Counter]:
    """Every corpus secret planted into a step output of a run of each format: found / planted, per format."""
    rng = random.Random(seed)
    cases = secret_cases(seed) + encoded_and_located_cases(seed) + round_three_cases(seed)
    by_format: dict[str, list] = defaultdict(list)
    for run in runs:
        if run.trajectory.steps:
            by_format[run.trajectory.source_format or "?"].append(run.trajectory)
    table: dict[str, Counter] = defaultdict(Counter)
    for fmt, trajectories in sorted(by_format.items()):
        for case in cases:
            host = rng.choice(trajectories)
            i = rng.randrange(len(host.steps))
            lines = host.steps[i].observation.splitlines(keepends=True) or [""]
            at = rng.randrange(len(lines) + 1)
            observation = "".join(lines[:at]) + "\n" + case.text + "\n" + "".join(lines[at:])
            out = redactor.redact(observation)
            row = table[fmt]
            row["planted"] += len(case.secrets)
            missed = [s for s in case.secrets if s in out]
            row["found"] += len(case.secrets) - len(missed)
            if missed:
                row[f"missed:{case.kind}"] += len(missed)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--dump", type=Path, help="write every redacted string with its context (TSV) here")
    parser.add_argument("--seed", type=int, default=7, help="seed of the planted secrets and where they go")
    args = parser.parse_args()
    runs, _ = load_many(args.paths)
    if not runs:
        print("no runs found", file=sys.stderr)
        return 1
    redactor = Redactor()
    dump = args.dump.open("w") if args.dump else None
    try:
        table = over_redaction(runs, redactor, dump)
    finally:
        if dump is not None:
            dump.close()
    print("| agent (format) | runs | MB | runs changed | markers | characters redacted | ms CPU per run | kinds |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, row in sorted(table.items()):
        kinds = ", ".join(f"{k[5:]} {n}" for k, n in sorted(row.items()) if k.startswith("kind:")) or "-"
        print(f"| {fmt} | {row['runs']} | {row['chars'] / 1e6:.1f} | {row['changed']} | {row['markers']} "
              f"| {row['redacted']} | {row['cpu'] / row['runs'] * 1e3:.0f} | {kinds} |")
    print("\n| agent (format) | planted secrets found | missed (kind) |")
    print("|---|---|---|")
    for fmt, row in planted(runs, redactor, args.seed).items():
        missed = ", ".join(f"{k[7:]} {n}" for k, n in sorted(row.items()) if k.startswith("missed:")) or "-"
        print(f"| {fmt} | {row['found']} / {row['planted']} | {missed} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
