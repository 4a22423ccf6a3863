"""Studio's context form through `langgraph dev`: every run setting with its docstring; bad values fail the run in
one line; keys the schema does not list are dropped by the server; a per-run agent setting reaches the agent."""

import pytest

from helpers.paths import ROOT

TASK = str(ROOT / "examples/tasks/slugify")


def test_the_context_form_is_the_run_settings(server):
    client, _ = server
    from mtl_graph.config.names import RUN_SETTINGS

    mtl = next(a for a in client.assistants.search() if a["graph_id"] == "mtl")
    form = client.assistants.get_schemas(mtl["assistant_id"])["context_schema"]["properties"]
    assert set(form) == set(RUN_SETTINGS)
    assert all(form[name]["description"] for name in form)
    assert form["top_k"]["description"] == "How many memories to retrieve."

    with pytest.raises(Exception, match="SettingsError: run context: invalid top_k 'many'"):
        client.runs.wait(None, "scripted_context", input={"task": TASK}, context={"top_k": "many"})
    out = client.runs.wait(None, "scripted_context", input={"task": TASK}, context={"top_kk": 3, "step_limit": 1})
    assert out["error"] is None and out["trajectory"]["exit_status"] == "step_limit"
