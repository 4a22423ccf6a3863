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

import httpx
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook
from langgraph.types import RetryPolicy

# 408 timeout, 409 conflict (OpenAI's "try again"), 425 too early, 429 rate limit, 529 overloaded (Anthropic).
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
# Client errors without a status: timeouts and dropped connections (openai and anthropic share these names).
TRANSIENT_NAMES = frozenset({"APIConnectionError", "APITimeoutError", "ServiceUnavailableError", "InternalServerError"})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a provider client's exception carries, if any."""
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same call again later may succeed: rate limits, server errors, timeouts, resets."""
    status = status_of(exc)
    if status is not None:
        return status in TRANSIENT_STATUS or status >= 500
    if isinstance(exc, (TimeoutError, ConnectionError, httpx.TransportError)):
        return True
    return any(cls.__name__ in TRANSIENT_NAMES for cls in type(exc).__mro__)


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


def describe(exc: BaseException) -> str:
    """The provider error in one line, with its HTTP status when the client exposes one (429, 503...)."""
    status = status_of(exc)
    head = f"{type(exc).__name__} (HTTP {status})" if status is not None else type(exc).__name__
    return f"{head}: {exc}"
