"""Model provider failures: which ones are worth retrying, how long the provider asks us to wait, one-line messages,
and the one retry policy every model call is made under (`RetrySettings`)."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


# Exception class names (anywhere in the MRO) that mean the connection failed or timed out, across the clients we
# meet (httpx, requests, openai, anthropic, aiohttp): checked by name so no client library has to be imported.
_TRANSIENT_NAMES = {
    "TimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout", "APITimeoutError",
    "ConnectionError", "ConnectError", "NetworkError", "RemoteProtocolError", "APIConnectionError",
    "ServerDisconnectedError", "ClientConnectionError", "InternalServerError", "ServiceUnavailableError",
    "RateLimitError", "OverloadedError",
}
_TRANSIENT_STATUS = {408, 409, 425, 429}


def status_code(exc: BaseException) -> int | None:
    """The HTTP status a provider error carries, when its client exposes one."""
    for value in (getattr(exc, "status_code", None), getattr(getattr(exc, "response", None), "status_code", None)):
        if isinstance(value, int):
            return value
    return None


def is_transient(exc: BaseException) -> bool:
    """A failure that may go away if the same call is made again: rate limits, 5xx, timeouts, dropped connections."""
    from langchain_core.exceptions import ModelError  # here: AgentConfig imports this module, `mtl --help` too

    if isinstance(exc, ModelError):  # LangChain's provider-neutral errors say so themselves
        return exc.is_retryable
    code = status_code(exc)
    if code is not None:
        return code in _TRANSIENT_STATUS or 500 <= code < 600
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds the provider asked us to wait (`retry-after-ms`, `retry-after` in seconds or as an HTTP date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except (TypeError, ValueError, AttributeError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def describe(exc: BaseException) -> str:
    """The provider error in one line, with its HTTP status when the client exposes one (429, 503...)."""
    code = status_code(exc)
    head = f"{type(exc).__name__} (HTTP {code})" if code is not None else type(exc).__name__
    return f"{head}: {exc}"



class RetrySettings(BaseModel):
    """How a model call that failed transiently is tried again: the one retry policy of every model call (the
    agent's turns, the plan, the judge, the distillers), in every host. Provider clients make no retries of their
    own (`max_retries=0`), so the attempts here are the attempts made."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    attempts: int = Field(default=3, ge=1, le=20)
    """Calls of one model request, the first included, while its provider fails transiently (429, 5xx, timeout)."""
    initial_delay: float = Field(default=1.0, ge=0, le=600)
    """Seconds before the first retry; doubled before each next one, with ±25% jitter."""
    max_delay: float = Field(default=60.0, ge=0, le=3600)
    """Longest wait between two calls, whatever the provider asks (its retry-after wins when longer than the backoff)."""

    def delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait after failed attempt `attempt` (0-based); re-raises when `exc` is not transient or no
        attempt is left."""
        if attempt + 1 >= self.attempts or not is_transient(exc):
            raise exc
        delay = min(self.max_delay, self.initial_delay * 2**attempt) * random.uniform(0.75, 1.25)
        return min(self.max_delay, max(delay, retry_after(exc) or 0.0))

    def call(self, fn: Callable[[], T], sleep: Callable[[float], Any] = time.sleep) -> T:
        """`fn()`, tried again after a transient provider error while attempts are left; its last error raised."""
        from langgraph.errors import GraphBubbleUp

        for attempt in range(self.attempts):
            try:
                return fn()
            except GraphBubbleUp:  # an interrupt or a command for LangGraph, not a failure
                raise
            except Exception as exc:
                sleep(self.delay(attempt, exc))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def acall(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`await fn()`, retried like `call`."""
        from langgraph.errors import GraphBubbleUp

        for attempt in range(self.attempts):
            try:
                return await fn()
            except GraphBubbleUp:
                raise
            except Exception as exc:
                await asyncio.sleep(self.delay(attempt, exc))
        raise AssertionError("unreachable")


_CURRENT: ContextVar[RetrySettings | None] = ContextVar("mtl_retry_settings", default=None)


def current_retry() -> RetrySettings:
    """The retry settings of the run in progress (`using_retry`), or the defaults."""
    return _CURRENT.get() or RetrySettings()


@contextmanager
def using_retry(settings: RetrySettings) -> Iterator[RetrySettings]:
    """Make `settings` the retry policy of every model call made in this context (thread or task): the pipeline's
    stages set the run's, so a distiller or judge given only a model retries the same way."""
    token = _CURRENT.set(settings)
    try:
        yield settings
    finally:
        _CURRENT.reset(token)
