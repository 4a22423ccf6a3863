"""One structured model call with validation and bounded, error-fed retries (judge and distillers share it).

Tool-calling models are asked through ``with_structured_output(schema, include_raw=True)``; the raw message is
then validated here with pydantic (a model that answers with JSON text instead of a tool call is still
accepted). Models without tool calling get the schema in the prompt and answer with a JSON object (JSON mode).
Every unusable answer — malformed JSON, empty, refusal, missing or over-long fields, a failed extra check — is
fed back to the model with the error, up to ``max_attempts`` calls; then `StructuredCallError` says why.
Each call is made under the run's retry settings (`current_retry()`): a provider that fails transiently is
asked again there, and one that outlasts them ends the call at once (`provider_error`) instead of costing the
remaining attempts, so retries never multiply.
"""

from __future__ import annotations

from functools import partial

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from mtl_graph.llm.retry import current_retry, is_transient
from mtl_graph.core.templates import render_template
from mtl_graph.core.trajectory import TokenUsage
from mtl_graph.core.errors import MTLError

fill = partial(render_template, "mtl_graph.llm")
"""A template of prompts/ with its $placeholders filled (a missing value is a ValueError: a bug, not bad input)."""

T = TypeVar("T", bound=BaseModel)
Check = Callable[[Any], "str | None"]
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class Revise(str):
    """Feedback from a check that asks for a content revision: it grants one extra attempt, so a leak retry
    does not eat into the budget for format errors."""


class StructuredCallError(MTLError, RuntimeError):
    """The model gave no valid answer within the attempts; errors lists why, attempt by attempt."""

    def __init__(self, errors: list[str], usage: TokenUsage, provider_error: BaseException | None = None) -> None:
        self.errors, self.usage, self.provider_error = errors, usage, provider_error
        """provider_error: the transient provider failure that outlasted the retries (the model never answered)."""
        super().__init__(f"no valid answer after {len(errors)} attempt(s): {errors[-1] if errors else 'no attempt'}")


@dataclass
class StructuredResult(Generic[T]):
    """A validated answer and what it cost."""

    value: T
    usage: TokenUsage
    attempts: int
    errors: list[str] = field(default_factory=list)
    """The errors of the attempts before the successful one."""



def usage_of(message: BaseMessage) -> TokenUsage:
    usage = getattr(message, "usage_metadata", None) or {}
    return TokenUsage(input=int(usage.get("input_tokens", 0) or 0), output=int(usage.get("output_tokens", 0) or 0))


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in text (code fences and surrounding prose tolerated)."""
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        for start in (i for i, ch in enumerate(candidate) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    excerpt = " ".join(text.split())[:160]
    raise ValueError(f"no JSON object in the answer (free text or a refusal?): {excerpt!r}")


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem, with the lengths of over-long strings (so the model can shorten them)."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "answer"
        got = err.get("input")
        size = f" (got {len(got)} characters)" if isinstance(got, str) and err["type"].startswith("string_too") else ""
        parts.append(f"field '{loc}': {err['msg']}{size}")
    return "; ".join(parts)


def _parse(raw: AIMessage, parsed: Any, schema: type[T]) -> T:
    if isinstance(parsed, schema):
        return parsed
    if raw.tool_calls:
        return schema.model_validate(raw.tool_calls[0]["args"])
    if raw.invalid_tool_calls:
        args = str(raw.invalid_tool_calls[0].get("args"))[:200]
        raise ValueError(f"the tool call arguments are not valid JSON: {args!r}")
    text = raw.text if isinstance(raw.text, str) else str(raw.content)
    if not text.strip():
        raise ValueError("empty answer")
    return schema.model_validate(extract_json_object(text))


def _feedback(raw: AIMessage, error: str) -> list[BaseMessage]:
    note = fill("_retry", error=error)
    if raw.tool_calls:  # tool-calling APIs require an answer to every call before the next turn
        return [raw, *(ToolMessage(content=note, tool_call_id=c.get("id") or "call") for c in raw.tool_calls)]
    has_text = bool(raw.text.strip()) if isinstance(raw.text, str) else bool(raw.content)
    return [raw, HumanMessage(note)] if has_text else [HumanMessage(note)]


_CUT_REASONS = {"length", "max_tokens", "max_output_tokens", "MAX_TOKENS"}


def was_cut(message: AIMessage) -> bool:
    """Whether the provider stopped the answer at its output-token limit (OpenAI, Anthropic, Google names)."""
    meta = message.response_metadata or {}
    return any(meta.get(key) in _CUT_REASONS for key in ("finish_reason", "stop_reason"))


def supports_tools(model: BaseChatModel) -> bool:
    return type(model).bind_tools is not BaseChatModel.bind_tools


def structured_call(model: BaseChatModel, schema: type[T], messages: list[BaseMessage], *, max_attempts: int = 3,
                    check: Check | None = None, json_mode: bool | None = None) -> StructuredResult[T]:
    """Ask model for one schema instance; check(value) may return an error to feed back (None = accept).

    json_mode None picks tool calling when the model supports it; True forces JSON text; False forces tools.
    """
    use_json = (not supports_tools(model)) if json_mode is None else json_mode
    if use_json:
        schema_text = json.dumps(schema.model_json_schema(), indent=1)
        messages = [*messages, HumanMessage(fill("_json_mode", schema=schema_text))]
        runnable: Any = model
    else:
        runnable = model.with_structured_output(schema, include_raw=True)
    usage, errors = TokenUsage(), []
    attempt, limit = 0, max_attempts
    while attempt < limit:
        attempt += 1
        try:
            out = current_retry().call(lambda: runnable.invoke(messages))
        except ValidationError as exc:  # parsers that validate inside invoke (OpenAI's json_schema mode, include_raw
            problem = describe_validation_error(exc)  # or not) raise it: still the model's answer, so feed it back
            errors.append(problem)
            messages = [*messages, HumanMessage(fill("_retry", error=problem))]
            continue
        except Exception as exc:  # provider errors vary by vendor; each costs an attempt, without feedback
            errors.append(f"model call failed: {exc.__class__.__name__}: {exc}")
            if is_transient(exc):  # it outlasted the retry settings: more attempts would only repeat them
                raise StructuredCallError(errors, usage, provider_error=exc) from exc
            continue
        raw, parsed = (out.get("raw"), out.get("parsed")) if isinstance(out, dict) else (out, None)
        if not isinstance(raw, AIMessage):
            raw = AIMessage(content=str(raw))
        usage += usage_of(raw)
        try:
            value = _parse(raw, parsed, schema)
            problem = check(value) if check else None
        except ValidationError as exc:
            problem = describe_validation_error(exc)
        except ValueError as exc:
            problem = str(exc)
        if problem is not None and was_cut(raw):  # the same prompt would be cut again: ask for less
            problem = fill("_too_long", error=problem)
        if problem is None:
            return StructuredResult(value=value, usage=usage, attempts=attempt, errors=errors)
        if isinstance(problem, Revise):
            limit += 1
        errors.append(problem)
        messages = [*messages, *_feedback(raw, problem)]
    raise StructuredCallError(errors, usage)
