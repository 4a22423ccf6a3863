"""The types every stage shares, importing nothing else of mtl_graph: a task, a run (steps, verdict), errors."""

from mtl_graph.core.errors import ErrorKind, MTLError, RunError, error_kind_of
from mtl_graph.core.task import Task, TaskError, TaskRef, as_task
from mtl_graph.core.trajectory import (INFRASTRUCTURE_EXIT_STATUSES, Outcome, Step, TokenUsage, Trajectory, Verdict,
                                       VerdictStatus)

__all__ = ["ErrorKind", "INFRASTRUCTURE_EXIT_STATUSES", "MTLError", "Outcome", "RunError", "Step", "Task", "TaskError",
           "TaskRef", "TokenUsage", "Trajectory", "Verdict", "VerdictStatus", "as_task", "error_kind_of"]
