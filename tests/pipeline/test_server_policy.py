"""The served graph's policy in process: its settings (bad ones are one line), its defaults, generated path
classes against the resolved truth, and the CLI / library graph that keeps accepting any path.
(`tests/graphs/test_studio_containment.py` drives the same cases through `langgraph dev`.)"""

from __future__ import annotations

import itertools
import json
import os
import runpy
from pathlib import Path

import pytest

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.pipeline.server_policy import PolicyError, ServerPolicy
from mtl_graph.config import MTLContext, SettingsError
from mtl_graph.config.environment import get_settings
from helpers.paths import ROOT

STUDIO_GRAPH = ROOT / "graphs" / "mtl.py"
POLICY_VARIABLES = ("MTL_TASK_ROOTS", "MTL_ALLOWED_BASE_URLS", "MTL_ALLOWED_PROVIDERS", "MTL_ALLOW_SETUP_NETWORK")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*POLICY_VARIABLES, "MTL_MODEL"):
        monkeypatch.delenv(name, raising=False)


def policy_of(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> ServerPolicy:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return ServerPolicy.from_settings(get_settings(), default_roots=[ROOT / "examples" / "tasks"])


def bad_environments(tmp: Path) -> list[tuple[dict[str, str], str]]:
    (tmp / "a-file").write_text("x")
    (tmp / "to-root").symlink_to("/")
    up = "/".join([str(tmp), *[".."] * len(tmp.parts)])
    roots = [(f"{tmp}{os.pathsep}{os.pathsep}{tmp}", "entry 2 is empty"), (os.pathsep, "entry 1 is empty"),
             ("relative/tasks", "entry 1 'relative/tasks' is not an absolute path"),
             (str(tmp / "missing"), "does not exist"), (str(tmp / "a-file"), "is not a directory"),
             ("/", "is the filesystem root"), (up, "is the filesystem root"), (str(tmp / "to-root"), "filesystem root"),
             (f"{tmp}{os.pathsep}relative", "entry 2 'relative' is not an absolute path")]
    urls = [("ftp://127.0.0.1/v1", "is not an http(s) URL"), ("127.0.0.1:8080/v1", "is not an http(s) URL"),
            ('["http://user:pw@127.0.0.1/v1"]', "without credentials"), ("[not json", "not a JSON list"),
            ("http://", "is not an http(s) URL"), ('["http://127.0.0.1/v1", 7]', "MTL_ALLOWED_BASE_URLS")]
    return ([({"MTL_TASK_ROOTS": value}, f"environment: MTL_TASK_ROOTS {says}" if says.startswith("entry") else says)
             for value, says in roots]
            + [({"MTL_ALLOWED_BASE_URLS": value}, says) for value, says in urls]
            + [({"MTL_ALLOWED_PROVIDERS": "[openai"}, "invalid MTL_ALLOWED_PROVIDERS"),
               ({"MTL_ALLOWED_PROVIDERS": '{"openai": 1}'}, "is not a provider name"),
               ({"MTL_ALLOWED_PROVIDERS": "openai:gpt-4o"}, "is not a provider name"),
               ({"MTL_ALLOW_SETUP_NETWORK": "perhaps"}, "invalid MTL_ALLOW_SETUP_NETWORK 'perhaps'")])


def test_a_bad_server_setting_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = bad_environments(tmp_path)
    for env, says in cases:
        with monkeypatch.context() as patch:
            with pytest.raises(SettingsError) as raised:
                policy_of(env, patch)
            line = str(raised.value)
            assert says in line and "\n" not in line and line.startswith("environment: "), (env, line)
            assert next(iter(env)) in line
    monkeypatch.setenv("MTL_TASK_ROOTS", "relative")
    with pytest.raises(SettingsError, match="^environment: MTL_TASK_ROOTS entry 1 'relative' is not an absolute"):
        runpy.run_path(str(STUDIO_GRAPH))  # the server shows this line when the graph fails to load


def test_the_served_graph_defaults_to_the_projects_task_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = runpy.run_path(str(STUDIO_GRAPH))["policy"]
    assert policy == ServerPolicy(task_roots=((ROOT / "examples" / "tasks").resolve(),))
    assert policy.allowed_base_urls == () and policy.allowed_providers is None and not policy.allow_setup_network
    empty = policy_of({"MTL_TASK_ROOTS": ""}, monkeypatch)  # no roots: inline tasks only
    with pytest.raises(PolicyError, match="outside this server's task roots .MTL_TASK_ROOTS: none are set"):
        empty.task(str(ROOT / "examples" / "tasks" / "slugify"))
    both = policy_of({"MTL_ALLOWED_PROVIDERS": "openai, anthropic", "MTL_ALLOWED_BASE_URLS":
                      "http://127.0.0.1:8080/v1/,https://llm.example/v1", "MTL_ALLOW_SETUP_NETWORK": "1"}, monkeypatch)
    assert both.allowed_providers == ("openai", "anthropic") and both.allow_setup_network
    assert both.allowed_base_urls == ("http://127.0.0.1:8080/v1", "https://llm.example/v1")


def test_generated_paths_are_inside_exactly_when_they_resolve_inside(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "echo").mkdir(parents=True)
    outside.mkdir()
    (root / "link-out").symlink_to(outside)
    (root / "link-in").symlink_to(root / "echo")
    (root / "chain").symlink_to(root / "link-out")
    (root / "loop").symlink_to(root / "loop")
    (tmp_path / "root-evil").mkdir()
    policy = ServerPolicy(task_roots=(root.resolve(),))
    parts = ["", ".", "..", "link-out", "link-in", "chain", "echo", "../root-evil", "//"]
    checked = 0
    for combo in itertools.product(parts, repeat=3):
        raw = "/".join([str(root), *combo])
        try:
            truth = Path(os.path.realpath(raw, strict=False)).is_relative_to(root.resolve())
        except OSError:
            truth = False
        try:
            policy.inside(raw, "task path")
            accepted = True
        except PolicyError as exc:
            accepted = False
            assert "\n" not in str(exc)
        assert accepted == truth, raw
        checked += 1
    with pytest.raises(PolicyError):
        policy.inside(str(root / "loop" / "x"), "task path")
    with pytest.raises(PolicyError):
        policy.inside(f"{root}\x00", "task path")
    assert checked == len(parts) ** 3


def test_setup_network_and_endpoints_follow_the_servers_lists(tmp_path: Path) -> None:
    task = {"id": "n", "instruction": "go", "setup": "true", "setup_network": True}
    with pytest.raises(PolicyError, match="setup_network"):
        ServerPolicy().task(task)
    assert ServerPolicy(allow_setup_network=True).task(task).setup_network
    policy = ServerPolicy(allowed_base_urls=("http://127.0.0.1:9/v1",), allowed_providers=("openai",))
    own = "http://10.0.0.1:8000/v1"
    for context in ({"model": "openai:x", "model_options": {"base_url": "http://127.0.0.1:9/v1/"}},
                    {"model_options": {"base_url": own + "/"}},  # the server's own endpoint, unlisted
                    {"model": f"scripted:{tmp_path / 'own.json'}"},  # the server's own model, outside the roots
                    {"model": "openai:gpt-4o-mini"}, {"top_k": 1}):
        policy.check_model(MTLContext(**context), f"scripted:{tmp_path / 'own.json'}", own)
    for context, says in (({"model_options": {"base_url": "http://127.0.0.1:10/v1"}}, "MTL_ALLOWED_BASE_URLS"),
                          ({"model": "anthropic:x"}, "MTL_ALLOWED_PROVIDERS"),
                          ({"model": f"scripted:{tmp_path / 'other.json'}"}, "scripted model file")):
        with pytest.raises(PolicyError, match=says):
            policy.check_model(MTLContext(**context), None, own)


def test_the_cli_and_library_graph_keep_accepting_any_path(tmp_path: Path) -> None:
    """Without a policy (mtl run, build_mtl_graph) a task anywhere runs; the same graph with one refuses it."""
    task = tmp_path / "anywhere"
    (task / "files").mkdir(parents=True)
    (task / "task.md").write_text("Create done.\n")
    (task / "task.json").write_text(json.dumps({"id": "anywhere", "check": "test -f done"}))

    def graph(policy=None):
        model = ScriptedChatModel(responses=[bash_call("touch done"), submit_call("done")])
        return build_mtl_graph(model, None, memory_type="none", online=False, run_log=tmp_path / "runs.jsonl",
                               policy=policy)

    assert graph().invoke({"task": str(task)})["verdict"]["status"] == "pass"
    refused = graph(ServerPolicy(task_roots=((ROOT / "examples" / "tasks").resolve(),))).invoke({"task": str(task)})
    assert refused["error"].startswith("invalid task: task path") and "outside this server's task roots" in refused[
        "error"]


def test_a_paused_agent_cannot_be_pointed_at_a_server_directory(tmp_path: Path) -> None:
    """With approval pauses a client may update the agent's own state (a subgraph checkpoint): a workspace the
    graph did not make runs nothing, and what lies there never reaches the trajectory."""
    from langgraph.checkpoint.memory import InMemorySaver

    canary = "-".join(["server", "only", "4c1d"])
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text(canary)
    task = tmp_path / "root" / "t"
    (task / "files").mkdir(parents=True)
    (task / "task.md").write_text("Create done.\n")
    (task / "task.json").write_text(json.dumps({"id": "t", "check": "test -f done"}))
    model = ScriptedChatModel(responses=[bash_call("cat keep.txt; touch done"), submit_call("done")])
    graph = build_mtl_graph(model, None, memory_type="none", online=False, run_log=tmp_path / "runs.jsonl",
                            checkpointer=InMemorySaver(), interrupt_before_tools=True,
                            workspace_root=tmp_path / "workspaces",
                            policy=ServerPolicy(task_roots=((tmp_path / "root").resolve(),)))
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"task": str(task)}, config)
    agent = graph.get_state(config, subgraphs=True).tasks[0].state
    while agent.tasks and agent.tasks[0].state is not None:
        agent = agent.tasks[0].state
    assert agent.next == ("tools",) and Path(agent.values["workspace"]).parent == tmp_path / "workspaces"
    own = agent.values["workspace"]
    graph.update_state(agent.config, {"workspace": str(victim)})
    while graph.get_state(config).next:
        out = graph.invoke(None, config)
    [first, _] = out["trajectory"]["steps"]
    assert first["observation"].startswith("sandbox error: workspace") and "is not one this server made" in first[
        "observation"]
    assert canary not in json.dumps(out) and not (victim / "done").exists()
    assert out["verdict"]["status"] == "error" and out["error"].startswith("refused: workspace")  # nor judged there
    assert (victim / "keep.txt").read_text() == canary
    from mtl_graph.judging.clean_room import discard_snapshot

    discard_snapshot(own)  # the refused run never reached its own cleanup
