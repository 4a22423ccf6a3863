"""The one retry policy of model calls (`RetrySettings`, on tenacity): how many calls, how long between them, and
what is never retried. The waits are recorded, not slept."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest
from langgraph.errors import GraphInterrupt

from mtl_graph.llm.retry import RetrySettings


def _rate_limited(retry: str | None = None) -> Exception:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx.Response(429, request=request, headers={"retry-after": retry} if retry else {})
    return openai.RateLimitError("Error code: 429 - Rate limit reached", response=response, body=None)


def _failing(*errors: BaseException, answer: str = "ok"):
    calls, queue = [], list(errors)

    def call() -> str:
        calls.append(1)
        if queue:
            raise queue.pop(0)
        return answer

    return call, calls


def test_transient_failures_are_called_again_with_backoff_jitter_and_the_providers_retry_after():
    fn, calls = _failing(TimeoutError(), ConnectionResetError(), _rate_limited(retry="30"), TimeoutError())
    slept: list[float] = []
    assert RetrySettings(attempts=5, initial_delay=1, max_delay=20).call(fn, slept.append) == "ok"
    assert len(calls) == 5 and len(slept) == 4
    assert 0.75 <= slept[0] <= 1.25 and 1.5 <= slept[1] <= 2.5  # doubled each time, ±25%
    assert slept[2] == 20  # the provider asked for 30 s: longer than the backoff, cut to max_delay
    assert 6 <= slept[3] <= 10


def test_the_last_error_is_raised_after_the_attempts_and_a_lasting_one_never_grows_past_max_delay():
    fn, calls = _failing(*[TimeoutError(f"slow {i}") for i in range(10)])
    slept: list[float] = []
    with pytest.raises(TimeoutError, match="slow 3"):  # the error itself, not tenacity's RetryError
        RetrySettings(attempts=4, initial_delay=10, max_delay=15).call(fn, slept.append)
    assert len(calls) == 4 and len(slept) == 3 and max(slept) <= 15


@pytest.mark.parametrize("error", [KeyError("choices"), ValueError("bad request body"), GraphInterrupt(())])
def test_a_bug_a_bad_request_or_langgraphs_control_flow_is_raised_at_once(error):
    fn, calls = _failing(error)
    slept: list[float] = []
    with pytest.raises(type(error)):
        RetrySettings(attempts=5).call(fn, slept.append)
    assert len(calls) == 1 and slept == []


def test_async_calls_are_retried_the_same_way():
    attempts = []

    async def call() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionResetError("reset by peer")
        return "ok"

    assert asyncio.run(RetrySettings(attempts=3, initial_delay=0).acall(lambda: call())) == "ok"
    assert len(attempts) == 3
