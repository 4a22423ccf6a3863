"""Importers of agent logs: the project's run log, LangChain messages, mini-swe-agent and SWE-agent trajectories,
and the session logs of the coding agents people run by hand: Claude Code, Codex CLI, OpenHands and Aider.

The format is detected from the content (file names lie: every tool writes ``.json``), and can be forced.
One module per format in `agents/`, each registering its `Importer` (`registry`); `ingest` is the engine that
turns logs into pool memories; this package re-exports the public names.
Nothing raises out of a batch: `import_file` and `load_many` report a bad file, or a bad record of a JSONL log, as
a `TrajectoryImportError` naming the file (and the line) with a one-line reason, and keep every good run; files
that are not runs (SWE-agent demonstrations) are a `NotARunError`, to be reported as skipped.
"""

from typing import Any

from mtl_graph.importers.agents.aider import AIDER
from mtl_graph.importers.agents.claude_code import CLAUDE_CODE
from mtl_graph.importers.agents.codex import CODEX
from mtl_graph.importers.common import (MAX_FILE_BYTES, BadRecordError, FileImport, Loaded, NotARunError,
                                                   TrajectoryImportError, UnknownFormatError, exit_code_of,
                                                   read_log_text, render_call)
from mtl_graph.importers.agents.langchain import LANGCHAIN, trajectory_from_messages
from mtl_graph.importers.loading import (detect_format, import_file, iter_log_files, load_file, load_many,
                                                    load_trajectories)
from mtl_graph.importers.mini_observation import parse_observation
from mtl_graph.importers.agents.mini_swe_agent import MINI_SWE_AGENT
from mtl_graph.importers.agents.openhands import OPENHANDS
from mtl_graph.importers.registry import (Importer, RegistrationError, format_names, get_importer,
                                                     importers, register, unregister)
from mtl_graph.importers.agents.runlog import RUNLOG
from mtl_graph.importers.agents.swe_agent import SWE_AGENT
from mtl_graph.importers.task_text import task_text

__all__ = [
    "AIDER", "CLAUDE_CODE", "CODEX", "FORMATS", "LANGCHAIN", "MAX_FILE_BYTES", "MINI_SWE_AGENT", "OPENHANDS", "RUNLOG",
    "SWE_AGENT", "BadRecordError", "FileImport",
    "Importer", "Loaded", "NotARunError", "RegistrationError", "TrajectoryImportError", "UnknownFormatError",
    "detect_format", "exit_code_of", "format_names", "get_importer", "import_file", "importers", "iter_log_files",
    "load_file", "load_many", "load_trajectories", "parse_observation", "read_log_text", "register", "render_call",
    "task_text", "trajectory_from_messages", "unregister",
]


def __getattr__(name: str) -> Any:
    if name == "FORMATS":  # the registered names, read when asked: an importer may register after this import
        return format_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
