"""False alarms of write-time screening on real agent runs: public trajectories read as trajectory memories.

    python benchmarks/screening_real_runs.py PATH [PATH ...] [--show N]

Each PATH is a local copy of public agent logs (a file or a directory searched as `mtl ingest` searches it), e.g.
the mini-swe-agent trajectories (`*.traj.json`) of a SWE-bench submission, SWE-agent `.traj` files, OpenHands
trajectories or Claude Code session files. Every run the project's importers read becomes the trajectory memory
`mtl ingest` would make (the format's own `build`, no model), and is screened three ways:

- `all text`: every rule over every field, task and command output included (what screening did before it told
  advice from quoted text);
- `rules`: `screen_rules(memory)`, what the pool does now (advice by every rule, quoted text by the prompt-structure
  rules);
- `semantic`: the classifier over the embeddings of the memory's advice sentences (memory/screening/semantic.py),
  at its shipped threshold, with the share of runs it would flag at other thresholds;
- `reasoning`: the run's own words (every step's reasoning: what a distilled memory of the run paraphrases) read
  by every rule as advice, the way `screen_rules` reads a memory's advice (the task's hosts local, an `rm` of the
  run's own files dropped).

Nothing here is a benign corpus the screen was tuned on: the runs are someone else's. The table counts runs per
source format; the flagged ones are listed with their reasons (`--show`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from mtl_graph.importers import load_many
from mtl_graph.memory.base import Outcome, Provenance, strings_of
from mtl_graph.memory.formats.trajectory import build
from mtl_graph.memory.engine.embeddings import local_embeddings
from mtl_graph.memory.screening.advice import hosts_named, with_hosts_local, without_own_cleanup
from mtl_graph.memory.screening.screen import screen_rules, screen_text
from mtl_graph.memory.screening.semantic import segments, shipped_screen


def memories_of(paths: list[Path]) -> list[tuple[str, str, object]]:
    """(source format, file name, trajectory memory) for every run the importers read."""
    loaded, _ = load_many(paths)
    out = []
    for run in loaded:
        try:
            memory, _ = build(run.trajectory, Outcome.UNKNOWN, Provenance())
        except ValueError:  # a run without an action makes no trajectory memory (as in `mtl ingest`)
            continue
        out.append((run.trajectory.source_format or "?", run.path.name, memory))
        REASONING[id(memory)] = ("\n".join(s.reasoning for s in run.trajectory.steps if s.reasoning),
                                 run.trajectory.task.instruction)
    return out


REASONING: dict[int, tuple[str, str]] = {}  # id(memory) -> (the run's own words, its task)


def screen_reasoning(memory) -> list[str]:
    """The rules' reasons for the run's own words read as a memory's advice (see the module's docstring)."""
    words, task = REASONING[id(memory)]
    return screen_text(with_hosts_local(without_own_cleanup(words), hosts_named([task])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--show", type=int, default=20, help="flagged runs to list per way")
    parser.add_argument("--no-semantic", action="store_true", help="skip the semantic screen (the rules only)")
    args = parser.parse_args()

    runs = memories_of(args.paths)
    if not runs:
        print("no runs found", file=sys.stderr)
        return 1
    ways = {"all text": lambda m: screen_text("\n".join(strings_of(m.content_fields()))), "rules": screen_rules,
            "reasoning": screen_reasoning}
    semantic = None if args.no_semantic else shipped_screen()
    if semantic is None:
        print("(no semantic screen: " + ("--no-semantic)" if args.no_semantic else "its weights file is absent)"))
    else:  # each run's highest sentence score, computed once (every sentence of all runs in one batch)
        found = [segments(m) for _, _, m in runs]
        unique = list(dict.fromkeys(s for f in found for s in f))
        start = time.process_time()
        score_of = dict(zip(unique, semantic.scores(local_embeddings().embed_documents(unique))))
        embed_ms = (time.process_time() - start) / len(runs) * 1e3
        top = {id(m): max((score_of[s] for s in f), default=0.0) for (_, _, m), f in zip(runs, found)}
        ways["semantic"] = lambda m: semantic.reasons([top[id(m)]])

    per_format = Counter(fmt for fmt, _, _ in runs)
    print(f"{len(runs)} runs: " + ", ".join(f"{fmt} {n}" for fmt, n in sorted(per_format.items())))
    for way, fn in ways.items():
        start = time.process_time()
        flagged = [(fmt, name, fn(memory)) for fmt, name, memory in runs]
        seconds = time.process_time() - start
        flagged = [f for f in flagged if f[2]]
        by_format = Counter(fmt for fmt, _, _ in flagged)
        by_reason: dict[str, int] = defaultdict(int)
        for _, _, reasons in flagged:
            for reason in reasons:
                by_reason[reason.split(":")[0]] += 1
        print(f"\n{way}: {len(flagged)}/{len(runs)} runs flagged ({len(flagged) / len(runs):.1%}); "
              + ", ".join(f"{fmt} {by_format[fmt]}/{n}" for fmt, n in sorted(per_format.items()))
              + f"; {seconds / len(runs) * 1e3:.1f} ms CPU per run")
        print("  by reason: " + (", ".join(f"{r} {n}" for r, n in sorted(by_reason.items())) or "-"))
        for fmt, name, reasons in flagged[:args.show]:
            print(f"  {fmt:15} {name[:50]:50} {'; '.join(r.split(':')[0] if ':' in r else r for r in reasons)}")
    if semantic is not None:
        print(f"\nsemantic: {len(unique)} distinct sentences, {embed_ms:.0f} ms CPU per run to embed them; runs "
              "flagged at other thresholds: " + ", ".join(f">= {t:.2f}: {sum(v >= t for v in top.values())}"
                                                         for t in (0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
