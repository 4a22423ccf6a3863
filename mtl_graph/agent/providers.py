"""Model provider failures: which ones are worth retrying, how long the provider asks us to wait, one-line messages."""

from __future__ import annotations

import email.utils
import time

from langchain_core.exceptions import ModelError


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

