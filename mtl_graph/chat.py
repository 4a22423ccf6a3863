"""Chat models from strings, in one place for the graph, the distillers, ingest and the evaluation runners."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtl_graph.core.errors import MTLError

if TYPE_CHECKING:  # langchain is imported when a model is made, not by `mtl --help`
    from langchain_core.language_models import BaseChatModel

SCRIPTED_PREFIX = "scripted:"
NO_MODEL = ("no chat model configured: pass --model PROVIDER:MODEL (e.g. openai:gpt-5-mini), set MTL_MODEL, "
            "or set `model` in the run's context; to see the pipeline without a model, run `mtl demo`")


class ModelNotConfigured(MTLError, RuntimeError):
    """A run needs a chat model and none was given, or the one named cannot be loaded."""


class ModelOptions(BaseModel):
    """Settings passed to `init_chat_model` with a "provider:model" string (None: the provider's default)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    """Endpoint of an OpenAI-compatible (or other) server, e.g. http://127.0.0.1:8080/v1."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Most tokens one answer may have."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds one model call may take."""
    max_retries: int | None = Field(default=None, ge=0, le=20)
    """Retries of a failed call inside the provider's client (transient errors, with backoff)."""

    def kwargs(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def chat_model(spec: BaseChatModel | str | None, options: ModelOptions | dict[str, Any] | None = None) -> BaseChatModel:
    """"provider:model" (init_chat_model), "scripted:FILE.json" (a replayed action script), or a model as is.

    options apply to "provider:model" strings only (a model object is already configured)."""
    if spec is None:
        raise ModelNotConfigured(NO_MODEL)
    if not isinstance(spec, str):
        return spec
    if spec.startswith(SCRIPTED_PREFIX):  # offline runs and debugging: see examples/tasks/*/demo_script.json
        from mtl_graph.agent import ScriptedChatModel, load_action_script

        try:
            return ScriptedChatModel(responses=load_action_script(spec.removeprefix(SCRIPTED_PREFIX)))
        except (OSError, ValueError) as exc:
            raise ModelNotConfigured(f"cannot load scripted model {spec!r}: {exc}") from exc
    from langchain.chat_models import init_chat_model

    try:
        settings = ModelOptions.model_validate(options or {})
    except ValidationError as exc:
        raise ModelNotConfigured(f"invalid model options: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    try:
        kwargs = settings.kwargs()
        if settings.base_url and spec.startswith("openai:") and not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = "unused"  # local OpenAI-compatible servers (llama.cpp, vLLM, Ollama) need no key
        return init_chat_model(spec, **kwargs)
    except Exception as exc:  # missing provider package, bad string, missing API key...
        raise ModelNotConfigured(f"cannot load chat model {spec!r}: {exc}") from exc


def model_label(model: Any) -> str | None:
    """A human-readable model name for provenance and run logs."""
    if model is None or isinstance(model, str):
        return model
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__
