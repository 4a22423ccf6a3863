"""Write-time screening: hostile texts flagged and benign memories falsely flagged, and what screening costs.

    python benchmarks/screening.py [LOG_DIR_OR_FILE ...]

The hostile corpus is generated (tests/helpers/screen_corpus.py: families x templates x obfuscations x languages), the
benign one is realistic advice, SWE-bench-shaped distilled memories, advice in six other languages and the agent
runs in tests/fixtures/logs (tests/helpers/screen_benign.py). Each row of the table counts texts flagged by their own
rule (hostile) or by any rule (benign). The speed rows time the full screening (normalisation, decoded payloads, every
language) beside, in the same run, the English rule table alone on the NFKC text: the baseline of what screening
did before it read obfuscated text. Extra log paths (e.g. public mini-swe-agent `*.traj.json` runs) are screened
too and reported as one more benign row.
"""

from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.screen_benign import benign_texts  # noqa: E402
from helpers.screen_corpus import hostile_cases  # noqa: E402

from mtl_graph.importers import load_many  # noqa: E402
from mtl_graph.memory.screening.screen import RULES, screen_text  # noqa: E402
from mtl_graph.memory.screening.rules import Lines  # noqa: E402


def run_texts(paths: list[Path]) -> list[str]:
    """Each loadable run as screening sees a trajectory: the task, then every action and observation."""
    loaded, _ = load_many(paths)
    return ["\n".join([r.trajectory.task.instruction, *(f"{s.action}\n{s.observation}" for s in r.trajectory.steps)])
            for r in loaded]


def baseline(text: str) -> list[str]:
    """The English rules on the NFKC text: no look-alike folding, no payloads, no other languages."""
    lines = Lines(unicodedata.normalize("NFKC", text))
    return [rule.name for rule in RULES if rule.matches(lines)]


def per_text_us(fn, texts: list[str], repeat: int = 3) -> float:
    """Best of `repeat` CPU-time passes, in microseconds per text (CPU time: the machine may be shared)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for text in texts:
            fn(text)
        best = min(best, time.process_time() - start)
    return best / max(1, len(texts)) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="*", type=Path, help="extra agent logs to screen as benign runs")
    args = parser.parse_args()

    cases = hostile_cases()
    caught = [any(r.startswith(f"{c.family}: ") for r in screen_text(c.text)) for c in cases]
    print(f"hostile: {sum(caught)}/{len(cases)} flagged by their own rule "
          f"({sum(caught) / len(cases):.1%}); the English rules on NFKC text alone: "
          f"{sum(c.family in baseline(c.text) for c in cases)}/{len(cases)}")
    for group in ("family", "language", "obfuscation"):
        totals, hits = Counter(), Counter()
        for case, hit in zip(cases, caught):
            key = {"family": case.family, "language": case.how.split("/")[0],
                   "obfuscation": case.how.split("/")[1]}[group]
            totals[key] += 1
            hits[key] += hit
        print(f"  by {group}: " + ", ".join(f"{k} {hits[k]}/{totals[k]}" for k in sorted(totals)))

    fixture_runs = run_texts([ROOT / "tests" / "fixtures" / "logs"])
    benign = {"advice + SWE-shaped + other languages": benign_texts(), "fixture runs": fixture_runs}
    if args.logs:
        benign["given logs"] = run_texts(args.logs)
    for name, texts in benign.items():
        alarms = [t for t in texts if screen_text(t)]
        print(f"benign {name}: {len(alarms)} false alarms / {len(texts)}")
        for text in alarms[:10]:
            print(f"  {screen_text(text)}: {text[:100]!r}")

    print("\nspeed (CPU time per text)      baseline    screening   ratio")
    for name, texts in (("benign memories", benign_texts()), ("hostile texts", [c.text for c in cases]),
                        ("fixture runs", fixture_runs)):
        base, full = per_text_us(baseline, texts), per_text_us(screen_text, texts)
        chars = sum(map(len, texts)) / max(1, len(texts))
        print(f"  {name:<28} {base:8.0f} us  {full:8.0f} us  {full / base:5.1f}x   ({chars:,.0f} chars avg, "
              f"{chars / full:.2f} MB/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
