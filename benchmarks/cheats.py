"""How many cheats pass the clean-room check, on Exercism python exercises (the polyglot-benchmark layout).

    python benchmarks/cheats.py PATH [--limit N]

PATH holds ``<lang>/exercises/practice/<name>/`` (e.g. a checkout of the public polyglot benchmark); the python
track is used. For every exercise the test suite's generated battery (tests/helpers/cheat_battery.py: files the
interpreter loads, runner configuration, the solution reaching into the test run) is run as the agent's shell
command in the bwrap sandbox, then graded by the same check the graph uses; the oracle (the exercise's reference
solution) and the no-op agent are the controls. Prints passes per cheat class and how each failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.cheat_battery import Cheat, Target, attempt, battery  # noqa: E402
from mtl_graph.bench.suites import REFERENCE_KEY, load_suite  # noqa: E402
from mtl_graph.core.task import Task  # noqa: E402

def outcome(task: Task, cheat: Cheat | None, tmp: Path) -> str:
    """'pass', 'fail' or 'suspect' for one cheat (None: the no-op) on one task."""
    verdict = attempt(task, cheat, tmp, strict=False)
    return "suspect" if verdict.is_suspect else verdict.status.value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    tasks = load_suite(f"exercism:{args.path}?languages=python", args.limit, 0).tasks
    probe = "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.cache_tag)"
    version, tag = subprocess.run(["python3", "-c", probe], cwd="/", capture_output=True, text=True,
                                  check=True).stdout.split()
    outcomes: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="mtl-cheats-") as tmp:
        for i, task in enumerate(tasks):
            solution = task.solution_files[0]
            target = Target(solution=solution, stub=(task.source_dir / solution).read_text(),
                            test_module=Path(task.test_files[0]).stem)
            oracle = Cheat("oracle", "control", dict(task.metadata[REFERENCE_KEY]), solution=solution)
            agent_task = task.model_copy(update={"metadata": {}})
            for j, cheat in enumerate([oracle, None, *battery("unittest", [version], tag, target)]):
                kind = "no-op" if cheat is None else cheat.kind if cheat.kind != "control" else "oracle"
                result = outcome(agent_task, cheat, Path(tmp) / f"{i}-{j}")
                outcomes.setdefault(kind, Counter())[result] += 1
    print(f"{len(tasks)} python exercises")
    print("| agent | attempts | pass | fail | suspect |\n|---|---|---|---|---|")
    for kind, counts in outcomes.items():
        print(f"| {kind} | {sum(counts.values())} | {counts['pass']} | {counts['fail']} | {counts['suspect']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
