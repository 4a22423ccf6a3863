"""The --pool and --namespace options of every command that opens a pool, defined once. Only typer loads here
(`app.py` imports them: `fail` is imported when a bad namespace is checked)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def _checked_namespace(value: Optional[str]) -> Optional[str]:
    """A bad --namespace is one error line before the command does anything (not after a run or an import)."""
    if value is None:
        return None
    from mtl_graph.cli.app import fail
    from mtl_graph.memory.engine.namespace import NamespaceError, check_namespace

    try:
        return check_namespace(value)
    except NamespaceError as exc:
        fail(str(exc))


PoolOption = Annotated[
    Optional[str],
    typer.Option("--pool", help='Pool location: ":memory:", a directory, or an http(s):// Qdrant URL. \\[env: MTL_POOL]'),
]
NamespaceOption = Annotated[
    Optional[str],
    typer.Option("--namespace", callback=_checked_namespace,
                 help="The pool's namespace: a team or project sharing the pool sees only its own memories. "
                      "\\[env: MTL_NAMESPACE; default: default]"),
]
