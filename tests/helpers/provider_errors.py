"""Model-provider failures as the OpenAI client raises them, and a scripted model that fails that way on cue."""

import httpx
import openai
from pydantic import Field

from mtl_graph.llm.scripted import ScriptedChatModel


def rate_limited() -> Exception:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    return openai.RateLimitError("Error code: 429 - Rate limit reached", response=httpx.Response(429, request=request),
                                 body=None)


def server_error() -> Exception:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    return openai.InternalServerError("Error code: 503 - overloaded", response=httpx.Response(503, request=request),
                                      body=None)


def timed_out() -> Exception:
    return openai.APITimeoutError(request=httpx.Request("POST", "https://api.openai.com/v1/chat/completions"))


class Flaky(ScriptedChatModel):
    """A scripted model whose calls with these numbers (1-based) fail as a provider under load fails (429 unless
    `error` names another failure)."""

    failing: set[int] = Field(default_factory=set)
    error: str = "429"
    calls: int = 0

    def _generate(self, *args, **kwargs):
        self.calls += 1
        if self.calls in self.failing:
            raise {"429": rate_limited, "503": server_error, "timeout": timed_out}[self.error]()
        return super()._generate(*args, **kwargs)
