"""The `mtl` command. Heavy imports happen inside commands so `mtl --help` stays fast.

Every command is here. `app.py` holds the Typer app and what commands share (`fail`: every error's one line);
`run.py` has `mtl run` / `mtl demo` (their run-setting flags come from `options.py`); `memories.py` has
`mtl memories ...`; `ingest.py` has `mtl ingest`; `pool.py` (with `pool_snapshot.py`, `pool_consolidate.py`) has
`mtl pool ...`; `evaluation.py` has `mtl eval`, `mtl report`, `mtl eval-learning` and `mtl eval-baselines`."""

from __future__ import annotations

from mtl_graph.cli import memories, run  # noqa: F401 - registering their commands on the app
from mtl_graph.cli.app import app, fail, open_pool
from mtl_graph.cli.help import fit_help
from mtl_graph.cli.memories import MAX_ERROR_LINES, memories_app

__all__ = ["MAX_ERROR_LINES", "app", "fail", "main", "memories_app", "open_pool"]


def _register_optional() -> None:
    """The commands whose modules import only typer at the top (their work is imported when they run)."""
    from mtl_graph.cli.evaluation import (PROTOCOL_SETTINGS, eval_baselines_cmd, eval_cmd, eval_learning_cmd,
                                          report_cmd)
    from mtl_graph.cli.options import with_run_settings
    from mtl_graph.cli.ingest import ingest
    from mtl_graph.cli.pool import pool_app

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
