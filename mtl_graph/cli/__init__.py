"""The `mtl` command. Heavy imports happen inside commands so `mtl --help` stays fast.

`app.py` holds the Typer app and what commands share; `run.py` has `mtl run` / `mtl demo` (their run-setting flags
come from `options.py`); `memories.py` has `mtl memories ...`; `mtl ingest`, `mtl pool`, `mtl eval` and
`mtl report` live with their pipeline stage."""

from __future__ import annotations

from mtl_graph.cli import memories, run  # noqa: F401 - registering their commands on the app
from mtl_graph.cli.app import app, fail, open_pool
from mtl_graph.cli.help import fit_help
from mtl_graph.cli.memories import MAX_ERROR_LINES, memories_app

__all__ = ["MAX_ERROR_LINES", "app", "fail", "main", "memories_app", "open_pool"]


def _register_optional() -> None:
    """Commands that live with their pipeline stage (their modules import only typer at the top)."""
    from mtl_graph.bench.commands import (PROTOCOL_SETTINGS, eval_baselines_cmd, eval_cmd, eval_learning_cmd,
                                          report_cmd)
    from mtl_graph.cli.options import with_run_settings
    from mtl_graph.experience.commands import ingest
    from mtl_graph.memory.commands import pool_app

    app.command("ingest")(ingest)
    app.add_typer(pool_app, name="pool")
    app.command("eval")(with_run_settings(from_env=False, exclude=PROTOCOL_SETTINGS)(eval_cmd))
    app.command("report")(report_cmd)
    app.command("eval-learning")(eval_learning_cmd)
    app.command("eval-baselines")(eval_baselines_cmd)


_register_optional()
fit_help(app)  # after every command is added: each one's help readable at 80 columns


def main() -> None:
    app()
