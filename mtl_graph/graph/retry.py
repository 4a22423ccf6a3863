"""Transient model-provider errors, and the RetryPolicy of the nodes that call a model (plan, judge, distill).

A node raises a transient provider error (429, 5xx, timeout, reset) while attempts are left, so LangGraph's
`RetryPolicy` runs it again with backoff; on its last attempt it records the error instead (the run goes to
write back with verdict `error`). Structured calls (the judge, the distillers) answer provider errors with
another attempt of their own and never raise them: `provider_errors()` watches every model call made inside it
through a LangChain callback, so the node still learns that the provider, not the model's answer, failed."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook
from langgraph.types import RetryPolicy

from mtl_graph.agent.providers import describe, is_transient

__all__ = ["describe", "is_transient", "provider_errors", "provider_retry", "retry_now"]


def provider_retry(attempts: int, first_interval: float) -> RetryPolicy:
    """The RetryPolicy of a model-calling node: transient errors only, exponential backoff with jitter."""
    return RetryPolicy(max_attempts=attempts, initial_interval=first_interval, backoff_factor=2.0, max_interval=60.0,
                       retry_on=is_transient)


def retry_now(exc: BaseException, runtime: Any, attempts: int) -> bool:
    """Whether a node should raise `exc` for its RetryPolicy: a transient error with an attempt left.

    Outside a graph run (no execution info) there is no retry: the caller records the error."""
    info = getattr(runtime, "execution_info", None)
    return is_transient(exc) and info is not None and info.node_attempt < attempts


class ProviderErrorWatch(BaseCallbackHandler):
    """Collects the transient errors of the model calls made while it is installed."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        if is_transient(error):
            self.errors.append(error)

    @property
    def last(self) -> BaseException | None:
        return self.errors[-1] if self.errors else None


_WATCH: ContextVar[ProviderErrorWatch | None] = ContextVar("mtl_provider_error_watch", default=None)
register_configure_hook(_WATCH, inheritable=True)


@contextmanager
def provider_errors() -> Iterator[ProviderErrorWatch]:
    """Install a ProviderErrorWatch on every model call made in this context (thread or task)."""
    watch = ProviderErrorWatch()
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        _WATCH.reset(token)
