"""The agent's prompt templates (``mtl_graph/agent/prompts/*.md``); a config's prompts_dir may override them."""

from functools import partial

from mtl_graph.core.templates import render_template

render = partial(render_template, "mtl_graph.agent")
