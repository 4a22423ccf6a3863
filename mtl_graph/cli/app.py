"""The `mtl` Typer app and what every command shares: --pool, --json, one-line errors, the open pool."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Annotated, Any, Iterator, NoReturn

import typer

from mtl_graph.cli.pool_options import NamespaceOption, PoolOption  # noqa: F401 - defined once, shared from here

app = typer.Typer(
    help="Memory transfer for coding agents: a shared memory pool, runs, ingestion and evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]


USAGE = 2
"""The exit code of a command given what it cannot use (click's, for a bad option); 1 is for a failure."""


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr, then exit: every command's errors end here."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


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
    from rich.console import Console

    return Console(stderr=stderr)


@app.callback()
def check_environment() -> None:
    """Every command reads MTL_* settings: a bad one is reported once, before the command starts."""
    settings()
