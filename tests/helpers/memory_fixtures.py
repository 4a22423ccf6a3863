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
