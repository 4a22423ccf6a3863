"""Model provider failures, and retrying them: which failures are worth another call (`is_transient`), how long the
provider asks us to wait (`retry_after`), one-line messages (`describe`), and the one retry policy every model call
is made under (`RetrySettings`, on tenacity), with the run's policy in a context variable (`using_retry`,
`current_retry`) for the calls that are not handed it.

Retries are made at the call, not by a LangGraph node `RetryPolicy`: a policy is fixed when a graph is compiled and
retries a whole node, while the run's settings come with its context and the middleware host (`create_agent`) has
no node policies; retrying each call under the run's settings makes every host retry alike."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential
from tenacity.wait import wait_base

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

    def call(self, fn: Callable[[], T], sleep: Callable[[float], Any] = time.sleep) -> T:
        """`fn()`, tried again after a transient provider error while attempts are left; its last error raised."""
        return Retrying(sleep=sleep, **self._policy())(fn)

    async def acall(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`await fn()`, retried like `call` (waiting with asyncio.sleep)."""
        async def attempt() -> T:  # a coroutine function: tenacity calls a plain one (a lambda) without awaiting it
            return await fn()

        return await AsyncRetrying(**self._policy())(attempt)

    def _policy(self) -> dict[str, Any]:
        """Tenacity's settings for these: `attempts` calls in all, transient errors only, the error itself raised
        (not tenacity's RetryError) when the last one fails or an error is not worth another call."""
        return {"stop": stop_after_attempt(self.attempts), "retry": retry_if_exception(_retryable),
                "wait": BackoffOrRetryAfter(self.initial_delay, self.max_delay), "reraise": True}


class BackoffOrRetryAfter(wait_base):
    """Tenacity wait: exponential backoff (`wait_exponential` from `initial_delay`, doubling, at most `max_delay`)
    with ±25% jitter, or the provider's `retry-after` when it asks for longer; never more than `max_delay`."""

    def __init__(self, initial_delay: float, max_delay: float) -> None:
        self.backoff = wait_exponential(multiplier=initial_delay, max=max_delay)
        self.max_delay = max_delay

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = self.backoff(retry_state) * random.uniform(0.75, 1.25)
        failure = retry_state.outcome.exception() if retry_state.outcome is not None else None
        asked = retry_after(failure) if failure is not None else None
        return min(self.max_delay, max(delay, asked or 0.0))


def _retryable(exc: BaseException) -> bool:
    """Worth another call: a transient provider failure, and not LangGraph's own control flow (an interrupt or a
    command bubbling up through the call is no failure)."""
    from langgraph.errors import GraphBubbleUp  # here: `mtl --help` imports this module, and not LangGraph

    return not isinstance(exc, GraphBubbleUp) and is_transient(exc)


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
