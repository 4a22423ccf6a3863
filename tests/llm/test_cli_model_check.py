"""A model string that cannot make a chat model is one error line before anything runs: an unknown provider, a
provider package that is not installed, an API key that is not set. Real init_chat_model calls (constructing a
client calls no network); `scripted:FILE` keeps working."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.llm.chat import (MissingCredentials, ModelNotConfigured, ProviderPackageMissing, UnknownModelProvider,
                            check_model, chat_model)
from mtl_graph.cli import app
from helpers.paths import EXAMPLES

runner = CliRunner()


def uninstalled_provider() -> str:
    """A provider init_chat_model knows whose package this environment does not have."""
    from langchain.chat_models import base

    for name, (module, *_) in sorted(getattr(base, "_BUILTIN_PROVIDERS", {}).items()):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            return name
    pytest.skip("every provider package is installed")


def one_line(message: str) -> str:
    assert len(message.strip().splitlines()) == 1, message
    return message


def test_an_unknown_provider_is_named_with_the_known_ones_listed_once() -> None:
    with pytest.raises(UnknownModelProvider) as caught:
        check_model("nonsense:xyz")
    message = one_line(str(caught.value))
    assert "unknown model provider 'nonsense'" in message
    assert message.count("known providers:") == 1 and message.count(" openai,") == 1 and "anthropic" in message
    with pytest.raises(UnknownModelProvider, match="did you mean openai"):
        check_model("opnai:gpt-5-mini")
    with pytest.raises(UnknownModelProvider, match="cannot tell the provider of model 'xyz'"):
        check_model("xyz")  # no prefix and nothing to infer one from


def test_a_missing_provider_package_names_the_pip_package() -> None:
    provider = uninstalled_provider()
    with pytest.raises(ProviderPackageMissing) as caught:
        check_model(f"{provider}:some-model")
    message = one_line(str(caught.value))
    assert f"'{provider}'" in message and "pip install langchain-" in message


def test_a_missing_key_names_the_variable_and_a_set_one_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for spec in ("openai:gpt-5-mini", "gpt-5-mini"):  # given, and inferred from the name by init_chat_model
        with pytest.raises(MissingCredentials, match="set the OPENAI_API_KEY environment variable"):
            check_model(spec)
    check_model("openai:local", {"base_url": "http://127.0.0.1:9/v1"})  # a local server takes no key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    check_model("openai:gpt-5-mini", {"timeout": 5})
    assert chat_model("openai:gpt-5-mini").model_name == "gpt-5-mini"


@pytest.mark.parametrize("spec, error", [("openai:", "no model name in 'openai:'"),
                                         ("scripted:missing.json", "cannot load scripted model")])
def test_other_bad_strings_are_one_line(spec: str, error: str) -> None:
    with pytest.raises(ModelNotConfigured, match=error) as caught:
        check_model(spec)
    one_line(str(caught.value))


def test_a_model_object_and_a_script_pass(tmp_path: Path) -> None:
    check_model(chat_model(f"scripted:{EXAMPLES / 'slugify' / 'demo_script.json'}"))
    check_model(f"scripted:{EXAMPLES / 'slugify' / 'demo_script.json'}")
    with pytest.raises(ModelNotConfigured, match="no chat model configured"):
        check_model(None)


@pytest.mark.parametrize("command, code", [(["run", str(EXAMPLES / "primes"), "--pool", ":memory:"], 1),
                                           (["demo"], 1),
                                           (["eval", "--suites", "humaneval", "--out", "{tmp}/eval"], 2)])
@pytest.mark.parametrize("spec, says", [("nonsense:xyz", "unknown model provider 'nonsense'"),
                                        ("openai:gpt-5-mini", "OPENAI_API_KEY")])
def test_the_cli_stops_with_one_line_before_the_run(command: list[str], code: int, spec: str, says: str,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    started = time.monotonic()
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    result = runner.invoke(app, [*args, "--model", spec])
    assert result.exit_code == code, result.output
    assert one_line(result.output).startswith("error: ") and says in result.output
    assert time.monotonic() - started < 10  # nothing planned, retrieved or sampled first
    assert not (tmp_path / "eval").exists()


@pytest.mark.parametrize("factory", ["build_mtl_graph", "with_memory_transfer", "MemoryTransferMiddleware"])
@pytest.mark.parametrize("spec, says", [("nonsense:xyz", "unknown model provider 'nonsense'"),
                                        ("openai:gpt-5-mini", "OPENAI_API_KEY")])
def test_the_factories_refuse_a_model_they_cannot_use_before_any_run(factory, spec, says, monkeypatch):
    from langgraph.graph import StateGraph

    import mtl_graph.pipeline as api
    from mtl_graph.llm.chat import ModelNotConfigured
    from mtl_graph.core import MTLError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make = {"build_mtl_graph": lambda: api.build_mtl_graph(spec, None),
            "with_memory_transfer": lambda: api.with_memory_transfer(StateGraph(dict).compile, None, model=spec),
            "MemoryTransferMiddleware": lambda: api.MemoryTransferMiddleware(None, model=spec)}[factory]
    with pytest.raises(ModelNotConfigured, match=says) as caught:
        make()
    assert isinstance(caught.value, MTLError) and "\n" not in str(caught.value)
