"""The `mtl` command. Heavy imports happen inside commands so `mtl --help` stays fast.

`app.py` holds the Typer app and `COMMANDS`, the one table of every command and group (each imported when it
runs or shows its help: `lazy.py`); `common.py` what the commands share (`fail`: every error's one line, the
--pool / --namespace / --json options, the open pool). The commands: `run.py` (`mtl run`, `mtl demo`; their
run-setting flags come from `options.py`), `memories.py` and `memories_lifecycle.py` (`mtl memories ...`, their
shared helpers in `memory_views.py`), `ingest.py` (`mtl ingest`), `pool.py`, `snapshots.py` and `consolidate.py`
(`mtl pool ...`), `evaluation.py` (`mtl eval`, `mtl report`, `mtl eval-learning`, `mtl eval-baselines`)."""

from __future__ import annotations

from typing import Any

from mtl_graph.cli.app import app, main
from mtl_graph.cli.common import fail, open_pool

__all__ = ["MAX_ERROR_LINES", "app", "fail", "main", "open_pool"]


def __getattr__(name: str) -> Any:
    if name == "MAX_ERROR_LINES":  # the import commands' limit, without importing them with the package
        from mtl_graph.cli.memories import MAX_ERROR_LINES

        return MAX_ERROR_LINES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
