"""Memories and tasks the graph, middleware and wrapper tests share."""

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task

RUN_TESTS = "python3 -m unittest -q test_sum"


def money_memory() -> InsightMemory:
    """Advice from another domain that a failing float comparison should retrieve mid-run."""
    return InsightMemory(title="Round money sums", description="Float sums of prices fail exact equality tests.",
                         content="Round each total to two decimals before comparing.",
                         sources=[Provenance(domain="finance", source_task_id="f1")])


def float_sum_task(task_id: str) -> Task:
    """A task whose unit test fails on 0.1 + 0.2 == 0.3."""
    return Task(id=task_id, domain="strings", instruction="Make the unit tests in test_sum.py pass.",
                files={"test_sum.py": "import unittest\nclass T(unittest.TestCase):\n"
                                      "    def test(self):\n        self.assertEqual(0.1 + 0.2, 0.3)\n"},
                check=RUN_TESTS)


def broken_add_task(task_id: str) -> Task:
    """A task whose add() subtracts: `python3 check.py` passes once the sign is fixed."""
    return Task(id=task_id, domain="math", instruction="Fix add() in calc.py so that `python3 check.py` passes.",
                files={"calc.py": "def add(a, b):\n    return a - b\n",
                       "check.py": "from calc import add\nassert add(2, 3) == 5\nprint('ok')\n"},
                check="python3 check.py")


def rerun_memory() -> InsightMemory:
    """Advice from another domain to rerun the check after the last edit (the memory a fix run cites)."""
    return InsightMemory(title="Rerun the check after the last edit",
                         description="Before submitting a fix, run the task's check command once more.",
                         content="Run the check after the final edit and read its output before submitting.",
                         sources=[Provenance(domain="strings", source_task_id="s1")])


def seeded(pool: MemoryPool) -> InsightMemory:
    """Add (and return) advice any coding task retrieves: run the tests after the last edit."""
    memory = InsightMemory(title="Run the unit tests after the last edit",
                           description="When a helper is rewritten and submitted without running its tests.",
                           content="Run the tests after the final edit and read the result before submitting.",
                           sources=[Provenance(domain="math", source_task_id="m1")])
    pool.add(memory)
    return memory


def write_task_dir(task: Task, path) -> None:
    """`task` as a task directory (task.md, task.json, files/), as a client of a served graph names one."""
    import json

    (path / "files").mkdir(parents=True)
    for name, text in task.files.items():
        (path / "files" / name).write_text(text)
    (path / "task.md").write_text(task.instruction + "\n")
    (path / "task.json").write_text(json.dumps({"id": task.id, "domain": task.domain, "check": task.check,
                                                "test_files": task.test_files}))


CODING_ADVICE = [  # (title, description) of coding advice, one lesson each
    ("Run the tests after the last edit", "Before submitting any fix, rerun the whole unit test suite."),
    ("Read the failing test first", "When a test fails, read its assertion before changing code."),
    ("Reproduce the bug before fixing it", "Write a minimal failing example of the reported defect."),
    ("Keep the public interface", "Do not rename functions or change signatures the tests import."),
    ("Check the output format", "Match the exact output format the task asks for, including newlines."),
    ("Pin dependency versions", "Lock package versions so builds are reproducible across machines."),
    ("Handle empty input", "Functions that take lists must handle an empty list without crashing."),
    ("Use timezone-aware datetimes", "Naive datetimes break across daylight-saving changes."),
    ("Close files you open", "Use a context manager so file handles are released on errors."),
    ("Prefer small commits", "Commit one logical change at a time with a clear message."),
    ("Validate command-line arguments", "Reject bad flags with a clear error message and a non-zero exit."),
    ("Avoid float equality", "Compare floating-point results with a tolerance, not exact equality."),
    ("Log before retrying", "Record the error before a network call is retried with backoff."),
    ("Escape shell arguments", "Quote file names passed to shell commands; they may contain spaces."),
    ("Profile before optimising", "Measure where the time goes before rewriting code for speed."),
    ("Check integer overflow", "Large sums can overflow fixed-width integers in C and Rust."),
    ("Test the edge cases", "Zero, one, negative and very large inputs break naive implementations."),
    ("Read the error message fully", "Compiler errors name the line and the expected type."),
    ("Keep functions pure", "Functions without side effects are easier to test and reuse."),
    ("Sort before binary search", "Binary search only works on sorted input."),
    ("Use the standard library", "Prefer well-tested library functions to hand-written parsers."),
    ("Free what you allocate", "Every malloc needs a matching free on every path, including errors."),
]
"""Insights a test can seed a pool with: distinct lessons, a few naming exact identifiers."""
