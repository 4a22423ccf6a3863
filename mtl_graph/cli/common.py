"""What the `mtl` commands share: one-line errors (`fail`), the --pool, --namespace and --json options, the MTL_*
settings, the open pool and the console.

The command modules import this; `app.py`, above them, lists the commands and imports none of them at the top.
Only typer and the standard library load here (the pool, the settings and rich load when a command uses them)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Annotated, Any, Iterator, NoReturn, Optional

import typer

USAGE = 2
"""The exit code of a command given what it cannot use (click's, for a bad option); 1 is for a failure."""


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr, then exit: every command's errors end here."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _checked_namespace(value: Optional[str]) -> Optional[str]:
    """A bad --namespace is one error line before the command does anything (not after a run or an import)."""
    if value is None:
        return None
    from mtl_graph.memory.engine.namespace import NamespaceError, check_namespace

    try:
        return check_namespace(value)
    except NamespaceError as exc:
        fail(str(exc))


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
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


def check_model(spec: Any, options: Any = None) -> None:
    """A model that cannot be made (unknown provider, package not installed, API key not set, script not found)
    ends the command with one line before anything runs, rather than after planning and retrieval."""
    from mtl_graph.llm.chat import ModelNotConfigured, check_model as check

    try:
        check(spec, options)
    except ModelNotConfigured as exc:
        fail(str(exc))


def settings() -> Any:
    """The MTL_* environment settings; a bad value ends the command with one line naming the variable."""
    from mtl_graph.config.environment import get_settings
    from mtl_graph.core.errors import SettingsError

    try:
        return get_settings()
    except SettingsError as exc:
        fail(str(exc))


@contextmanager
def open_pool(location: str | None, namespace: str | None = None) -> Iterator[Any]:
    """The pool named by --pool or MTL_POOL, in the namespace of --namespace or MTL_NAMESPACE; known failures,
    opening or using it, become one-line errors."""
    from mtl_graph.memory.engine.embeddings import EmbeddingError
    from mtl_graph.memory.pool.pool import MemoryPool, PoolError

    try:
        pool = MemoryPool.open(location or settings().pool, namespace=namespace)
    except (PoolError, EmbeddingError) as exc:
        fail(str(exc))
    try:
        yield pool
    except (PoolError, EmbeddingError) as exc:  # e.g. a corrupt point met while listing or searching
        fail(str(exc))
    finally:
        pool.close()


def console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr), rich imported only when a command prints with it."""
    from rich.console import Console

    return Console(stderr=stderr)
