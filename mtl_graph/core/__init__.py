"""The types every stage shares, importing nothing else of mtl_graph: a task, a run (steps, verdict), errors, and
the process's own MTL_* settings (`environment`).

Names load on first use: `from mtl_graph.core.errors import MTLError` (every module's error base) costs no model
building, so `mtl --help` stays quick."""

from mtl_graph.core.faces import lazy_names

_HOME = {
    "ErrorKind": ".errors", "MTLError": ".errors", "RunError": ".errors", "SettingsError": ".errors",
    "error_kind_of": ".errors", "ProcessSettings": ".environment", "process_settings": ".environment",
    "Task": ".task", "TaskError": ".task", "TaskRef": ".task", "as_task": ".task",
    "INFRASTRUCTURE_EXIT_STATUSES": ".trajectory", "Outcome": ".trajectory", "Step": ".trajectory",
    "TokenUsage": ".trajectory", "Trajectory": ".trajectory", "Verdict": ".trajectory", "VerdictStatus": ".trajectory",
}
__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_names(__name__, _HOME)
