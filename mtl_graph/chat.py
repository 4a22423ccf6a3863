"""Chat models from strings, in one place for the graph, the distillers, ingest and the evaluation runners."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

SCRIPTED_PREFIX = "scripted:"
NO_MODEL = ("no chat model configured: pass --model PROVIDER:MODEL (e.g. openai:gpt-5-mini), set MTL_MODEL, "
            "or set `model` in the run's context; to see the pipeline without a model, run `mtl demo`")


class ModelNotConfigured(RuntimeError):
    """A run needs a chat model and none was given, or the one named cannot be loaded."""


def chat_model(spec: BaseChatModel | str | None) -> BaseChatModel:
    """"provider:model" (init_chat_model), "scripted:FILE.json" (a replayed action script), or a model as is."""
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
        return init_chat_model(spec)
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
