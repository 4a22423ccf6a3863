"""Chat models from strings, in one place for the graph, the distillers, ingest and the evaluation runners.

`chat_model(spec, options)` makes one ("provider:model" through `init_chat_model` with `ModelOptions`,
"scripted:FILE.json" a replayed action script, a model object as it is); `check_model` makes it up front, so a
factory or a command refuses a model it cannot use before a run starts; `model_label` names a model for
provenance and run logs. A model that cannot be made is one `ModelNotConfigured` line, of a kind
(`UnknownModelProvider`, `ProviderPackageMissing`, `MissingCredentials`). Provider clients are made with
`max_retries=0`: retries are the run's `RetrySettings` (`mtl_graph/llm/retry.py`)."""

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


class UnknownModelProvider(ModelNotConfigured):
    """The model string names a provider that LangChain's init_chat_model does not know."""


class ProviderPackageMissing(ModelNotConfigured):
    """The provider is known, but its LangChain integration package is not installed."""


class MissingCredentials(ModelNotConfigured):
    """The provider's client needs an API key and the environment variable it reads is not set."""


class ModelOptions(BaseModel):
    """Settings passed to `init_chat_model` with a "provider:model" string (None: the provider's default)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    base_url: str | None = None
    """Endpoint of an OpenAI-compatible (or other) server, e.g. http://127.0.0.1:8080/v1."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Most tokens one answer may have."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds one model call may take."""
    max_retries: int | None = Field(default=None, ge=0, le=20)
    """Retries inside the provider's client, on top of the run's retry settings (unset: 0, the retry settings own
    retries; a client's own default would multiply them)."""

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
        from mtl_graph.llm.scripted import ScriptedChatModel

        try:
            return ScriptedChatModel.from_script(spec.removeprefix(SCRIPTED_PREFIX))
        except (OSError, ValueError) as exc:
            raise ModelNotConfigured(f"cannot load scripted model {spec!r}: {exc}") from exc
    return _provider_model(spec, options)


def check_model(spec: BaseChatModel | str | None, options: ModelOptions | dict[str, Any] | None = None) -> None:
    """Raise ModelNotConfigured (one line) if `spec` cannot make a chat model; calls no model and no network.

    For commands and graph factories to call before a run starts: an unknown provider, a provider package that is
    not installed, a missing API key, bad options or a scripted file that does not load are found here, not after
    the run has planned and retrieved. A model object is taken as it is."""
    chat_model(spec, options)


API_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "azure_openai": ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "mistralai": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "perplexity": ("PPLX_API_KEY", "PERPLEXITY_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
    "upstage": ("UPSTAGE_API_KEY",),
}
"""The environment variables each provider's client reads its key from (any one will do; the first is named).
Most clients accept a missing key at construction and fail at the first call, after planning and retrieval, so
the key is looked for up front. Providers with a credential chain (AWS, Google Cloud, Azure AI, IBM) or none
(ollama, litellm, a local huggingface model) are left to their client."""


def _known_providers() -> dict[str, tuple[str, ...]]:
    """init_chat_model's provider table (name -> (module, class, ...)). It is private to LangChain: should it go,
    this is empty and init_chat_model's own errors, cut to one line, are what the user sees."""
    from langchain.chat_models import base

    table = getattr(base, "_BUILTIN_PROVIDERS", None)
    return table if isinstance(table, dict) else {}


def _unknown_provider(spec: str, provider: str | None, known: dict[str, Any]) -> UnknownModelProvider:
    import difflib

    names = sorted(known)
    if provider is None:
        head = f"cannot tell the provider of model {spec!r}: write it as PROVIDER:MODEL"
    else:
        guess = difflib.get_close_matches(provider, names, n=1)
        head = f"unknown model provider {provider!r} in {spec!r}" + (f" (did you mean {guess[0]}?)" if guess else "")
    listed = f"; known providers: {', '.join(names)}" if names else ""
    return UnknownModelProvider(f"{head}{listed}; or {SCRIPTED_PREFIX}FILE.json to replay an action script")


def _client_retries(spec: str) -> bool:
    """Whether the provider's chat model class has a `max_retries` setting of its own (OpenAI, Anthropic, ...)."""
    import importlib

    provider, colon, _ = spec.partition(":")
    entry = _known_providers().get(provider) if colon else None
    if entry is None:
        return False
    try:
        cls = getattr(importlib.import_module(str(entry[0])), str(entry[1]))
    except (ImportError, AttributeError):
        return False
    return "max_retries" in getattr(cls, "model_fields", {})


def _check_provider(spec: str, settings: ModelOptions) -> None:
    """The checks init_chat_model does not do up front, or words badly, for a "provider:model" string."""
    import importlib.util

    provider, colon, name = spec.partition(":")
    known = _known_providers()
    if not colon or not known:  # a bare name: init_chat_model infers the provider (gpt-*, claude-*, ...)
        return
    if provider not in known:
        raise _unknown_provider(spec, provider, known)
    if not name.strip():
        raise ModelNotConfigured(f"no model name in {spec!r}: write it as PROVIDER:MODEL, e.g. openai:gpt-5-mini")
    module = str(known[provider][0]).split(".")[0]
    if importlib.util.find_spec(module) is None:
        package = module.replace("_", "-")
        raise ProviderPackageMissing(f"model provider {provider!r} needs the {package} package: "
                                     f"pip install {package}")
    variables = API_KEY_VARIABLES.get(provider, ())
    # A base_url names another server (a local one, a proxy) that may take no key or another one.
    if variables and not settings.base_url and not any(os.environ.get(v) for v in variables):
        alternatives = f" (or {' or '.join(variables[1:])})" if len(variables) > 1 else ""
        raise MissingCredentials(f"model {spec!r} needs an API key: set the {variables[0]} environment "
                                 f"variable{alternatives}")


def _provider_model(spec: str, options: ModelOptions | dict[str, Any] | None) -> BaseChatModel:
    """A "provider:model" string through init_chat_model, its failures as one line."""
    try:
        settings = ModelOptions.model_validate(options or {})
    except ValidationError as exc:
        raise ModelNotConfigured(f"invalid model options: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    from langchain.chat_models import init_chat_model

    _check_provider(spec, settings)
    kwargs = settings.kwargs()
    if settings.max_retries is None and _client_retries(spec):
        kwargs["max_retries"] = 0  # the run's RetrySettings retry every call; the client must not retry again
    if settings.base_url and spec.startswith("openai:") and not os.environ.get("OPENAI_API_KEY"):
        kwargs["api_key"] = "unused"  # local OpenAI-compatible servers (llama.cpp, vLLM, Ollama) need no key
    try:
        return init_chat_model(spec, **kwargs)
    except ImportError as exc:  # a bare name whose inferred provider's package is missing
        raise ProviderPackageMissing(f"cannot load chat model {spec!r}: {_first_line(exc)}") from exc
    except ValueError as exc:
        if "infer" in str(exc) or "Unsupported" in str(exc):
            raise _unknown_provider(spec, None, _known_providers()) from exc
        raise ModelNotConfigured(f"cannot load chat model {spec!r}: {_first_line(exc)}") from exc
    except Exception as exc:  # the provider's client refusing its settings, or a key it looks for itself
        named = [v for names in API_KEY_VARIABLES.values() for v in names if v in str(exc)]
        if named:
            raise MissingCredentials(f"model {spec!r} needs an API key: set the {named[0]} environment "
                                     "variable") from exc
        raise ModelNotConfigured(f"cannot load chat model {spec!r}: {type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def model_label(model: Any) -> str | None:
    """A human-readable model name for provenance and run logs."""
    if model is None or isinstance(model, str):
        return model
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__
