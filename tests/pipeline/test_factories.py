"""The three factories take the same settings the same way: `config=` (an MTLConfig) with keyword overrides,
nested settings merged field by field, a bad or unknown setting one clear line."""

import pytest
from langgraph.graph import StateGraph

from mtl_graph.llm.scripted import ScriptedChatModel
from mtl_graph.pipeline import MemoryTransferMiddleware, MTLConfig, build_mtl_graph, with_memory_transfer
from mtl_graph.config import RetrievalSettings, SettingsError
from mtl_graph.pipeline.stages import make_config

BASE = MTLConfig(retrieval={"memory_type": "workflow", "top_k": 5, "hold_one_out": True},
                 model={"options": {"temperature": 0.0}})


def _nodes_of(factory: str, config=None, **settings):
    model = ScriptedChatModel()
    if factory == "build_mtl_graph":
        graph = build_mtl_graph(model, None, config=config, **settings)
    elif factory == "with_memory_transfer":
        inner = StateGraph(dict)
        inner.add_node("noop", lambda s: {})
        inner.set_entry_point("noop")
        graph = with_memory_transfer(inner.compile(), None, model=model, config=config, **settings)
    else:
        return MemoryTransferMiddleware(None, model=model, config=config, **settings).nodes
    return graph.builder.nodes["plan"].runnable.func.__self__


@pytest.mark.parametrize("factory", ["build_mtl_graph", "with_memory_transfer", "MemoryTransferMiddleware"])
def test_every_factory_takes_a_config_and_overrides_over_it(factory):
    cfg = _nodes_of(factory, BASE, top_k=2, model_options={"max_tokens": 64}).config
    assert (cfg.retrieval.memory_type, cfg.retrieval.top_k, cfg.retrieval.hold_one_out) == ("workflow", 2, True)
    assert cfg.model.options.temperature == 0.0 and cfg.model.options.max_tokens == 64  # merged, not replaced
    assert BASE.retrieval.top_k == 5 and BASE.model.options.max_tokens is None  # the caller's config is unchanged


@pytest.mark.parametrize("factory", ["build_mtl_graph", "with_memory_transfer", "MemoryTransferMiddleware"])
@pytest.mark.parametrize("settings, says", [({"top_kk": 3}, "unknown setting top_kk"),
                                            ({"top_k": 99}, "invalid top_k 99"),
                                            ({"memory_type": "poetry"}, "invalid memory_type 'poetry'"),
                                            ({"model_options": {"temprature": 1}}, "unknown setting model_options.temprature")])
def test_a_bad_setting_is_one_line_in_every_factory(factory, settings, says):
    with pytest.raises(SettingsError, match=says) as caught:
        _nodes_of(factory, **settings)
    assert "\n" not in str(caught.value)


def test_none_means_not_given_and_defaults_come_from_the_one_definition():
    cfg = make_config(None, exclude_domains=None, distill_formats=None, top_k=None)
    assert cfg == MTLConfig() and cfg.retrieval.top_k == RetrievalSettings.model_fields["top_k"].default
    with pytest.raises(SettingsError, match="config must be an MTLConfig"):
        make_config({"top_k": 1})
