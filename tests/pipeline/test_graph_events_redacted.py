"""The custom stream is redacted like the run log: a secret the agent typed never reaches Studio or a client.

Real components: bwrap, the graph, the run log; the model is scripted (real tool calls); the secrets are generated."""

import json

from helpers.secret_corpus import Gen

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.core.task import Task

TASK = Task(id="leaky", domain="ops", instruction="Clone the app repository into app/.")


def test_step_events_carry_redacted_commands(tmp_path):
    g = Gen(7)
    token, password = f"ghp_{g.b62(36)}", g.password()
    commands = [f"git clone https://{token}@github.com/acme/app.git app || true",
                f"mysql -u deploy -p'{password}' -h db.internal -e 'select 1' || true"]
    model = ScriptedChatModel(responses=[*(bash_call(c) for c in commands), submit_call("cloned")])
    graph = build_mtl_graph(model, None, memory_type="none", online=False, sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl")
    events, final = [], {}
    for mode, chunk in graph.stream({"task": TASK}, stream_mode=["custom", "values"]):
        (events.append(chunk) if mode == "custom" else final.update(chunk))
    steps = [e for e in events if e["kind"] == "step"]
    streamed = json.dumps(events)
    assert len(steps) == 3 and token not in streamed and password not in streamed
    assert "[REDACTED:" in steps[0]["command"] and steps[0]["command"].startswith("git clone https://")
    assert "github.com/acme/app.git app" in steps[0]["command"] and "db.internal" in steps[1]["command"]
    assert steps[2] == {"kind": "step", "tool": "submit", "command": "cloned", "exit_code": None}
    logged = (tmp_path / "runs.jsonl").read_text()
    assert token not in logged and password not in logged  # the run log was already redacted
    assert final["trajectory"]["steps"][0]["action"] == commands[0]  # state keeps the agent's own record
