"""The stages' services are fixed at build time, and each run's settings are resolved once per run.

Whole graph runs with a scripted model (real tool calls), a real sandbox and a real pool. The spies below pass
every call through to the real code; they only count how often a run's settings are resolved and which object
each node was given."""

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.types import Command

from helpers.memory_fixtures import seeded
from mtl_graph.agent import DefaultAgent
from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.llm.retry import RetrySettings
from mtl_graph.core.task import Task
from mtl_graph.pipeline import MTLContext, build_mtl_graph
from mtl_graph.pipeline import services
from mtl_graph.config import SettingsError
from mtl_graph.pipeline.nodes import MTLNodes
from mtl_graph.pipeline.stages import make_config, make_nodes
from mtl_graph.pipeline.services import PoolSource, RunMemo, StageServices
from mtl_graph.pipeline.services import open_default_pool
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import EXAMPLES

SCRIPT = EXAMPLES / "slugify" / "demo_script.json"
SLUGIFY = str(EXAMPLES / "slugify")


class Seen:
    """How often `effective` resolved a run's settings, and every (context, settings, nodes) a node was given."""

    def __init__(self) -> None:
        self.resolved, self.given, self.lock = 0, [], threading.Lock()

    def by_context(self) -> dict[int, set[int]]:
        """The ids of the settings objects handed out, per context object."""
        out: dict[int, set[int]] = {}
        for context, cfg, _ in self.given:
            out.setdefault(id(context), set()).add(id(cfg))
        return out


@pytest.fixture
def seen(monkeypatch) -> Seen:
    record = Seen()
    real_effective, real_settings = services.effective, MTLNodes.settings

    def effective(config, context):
        with record.lock:
            record.resolved += 1
        return real_effective(config, context)

    def settings(self, runtime):
        cfg = real_settings(self, runtime)
        with record.lock:
            record.given.append((getattr(runtime, "context", None), cfg, self))
        return cfg

    monkeypatch.setattr(services, "effective", effective)
    monkeypatch.setattr(MTLNodes, "settings", settings)
    return record


def scripted_graph(pool, **settings):
    return build_mtl_graph(ScriptedChatModel.from_script(SCRIPT), pool, **settings)


def nodes_of(pool=None, agent=None) -> MTLNodes:
    return make_nodes(pool, ScriptedChatModel(responses=[]), agent or DefaultAgent(), None, None, make_config())


# ---------------------------------------------------------------------- fixed at build time
def test_the_services_cannot_be_changed_after_the_build(pool):
    nodes = nodes_of(pool)
    assert isinstance(nodes.services, StageServices) and nodes.pool is pool and nodes.served is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        nodes.services.config = make_config(top_k=9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        nodes.services.pools = PoolSource()
    for name in ("config", "policy", "served", "pool", "model", "agent", "services", "judge_override", "anything"):
        with pytest.raises(AttributeError, match="cannot be changed|can't set|has no setter"):
            setattr(nodes, name, None)
    with pytest.raises(AttributeError, match="cannot be changed"):
        nodes.services.pools._pool = None  # the lazy pool's owner is sealed too
    with pytest.raises(AttributeError, match="cannot be changed"):
        del nodes.services.pools._views
    assert nodes.pool is pool and nodes.pool_of() is pool and nodes.config.retrieval.top_k == make_config().retrieval.top_k


def test_a_served_graph_keeps_its_own_ledger(pool):
    from mtl_graph.pipeline.credit import ServedRuns
    from mtl_graph.pipeline.server_policy import ServerPolicy

    served = StageServices.of(pool, None, None, None, None, make_config(), ServerPolicy())
    assert isinstance(served.served, ServedRuns) and MTLNodes(served).served is served.served


# ---------------------------------------------------------------------- once per run
def test_every_node_of_a_run_gets_the_one_settings_object(seen, pool, tmp_path):
    memory = seeded(pool)
    graph = scripted_graph(pool, memory_type="insight", run_log=tmp_path / "runs.jsonl")
    context = MTLContext(top_k=1, judge_also=False)
    out = graph.invoke({"task": SLUGIFY}, context=context)
    assert out["error"] is None and out["verdict"]["status"] == "pass"
    assert [r["id"] for r in out["retrieved"]] == [memory.id]
    assert seen.resolved == 1  # once for the whole run (it was ~35 times: every node, several times each)
    [objects] = seen.by_context().values()
    assert len(objects) == 1 and len(seen.given) >= 6  # every stage asked; all got the one object
    cfg = seen.given[0][1]
    assert cfg.retrieval.top_k == 1 and cfg.retrieval.memory_type == "insight"
    nodes = seen.given[0][2]
    assert nodes.agent_settings(Runtime(context=context)) is nodes.agent_settings(Runtime(context=context))
    assert seen.resolved == 1


def test_a_run_without_context_uses_the_build_settings_themselves(seen, pool, tmp_path):
    out = scripted_graph(pool, memory_type="none", online=False, run_log=tmp_path / "runs.jsonl").invoke(
        {"task": SLUGIFY})
    assert out["verdict"]["status"] == "pass" and seen.resolved == 0
    nodes = seen.given[0][2]
    assert all(cfg is nodes.config for _, cfg, _ in seen.given)


def test_another_run_gets_its_own_settings_and_an_edited_context_is_resolved_again(seen, pool, tmp_path):
    seeded(pool)
    graph = scripted_graph(pool, memory_type="insight", online=False, run_log=tmp_path / "runs.jsonl")
    context = MTLContext(top_k=1)
    first = graph.invoke({"task": SLUGIFY}, context=context)
    second = graph.invoke({"task": SLUGIFY}, context=MTLContext(memory_type="none"))
    assert len(first["retrieved"]) == 1 and second["retrieved"] == [] and seen.resolved == 2
    assert [len(ids) for ids in seen.by_context().values()] == [1, 1]
    context.top_k = 0  # the caller's context object, reused and changed between two runs
    third = graph.invoke({"task": SLUGIFY}, context=context)
    assert third["retrieved"] == [] and seen.resolved == 3
    records = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [len(r["retrieved"]) for r in records] == [1, 0, 0]


def test_a_resumed_run_brings_a_new_context_and_is_resolved_again(seen, pool, tmp_path):
    task = Task(id="resume-task", domain="math", instruction="Make f.X equal 2.", files={"f.py": "X = 1\n"},
                check="python3 -c 'import f; assert f.X == 2'")
    model = ScriptedChatModel(responses=[bash_call("echo 'X = 2' > f.py"), submit_call("set X")])
    graph = build_mtl_graph(model, pool, memory_type="none", distill_formats=["trajectory"],
                            checkpointer=InMemorySaver(), run_log=tmp_path / "runs.jsonl")
    config = {"configurable": {"thread_id": "t1"}}
    paused = graph.invoke({"task": task}, config=config, context=MTLContext(review_memories=True))
    assert paused["__interrupt__"] and seen.resolved == 1
    before = len(seen.given)
    resumed = MTLContext(review_memories=True)
    out = graph.invoke(Command(resume="approve"), config=config, context=resumed)
    assert len(out["new_memory_ids"]) == 1 and seen.resolved == 2
    assert {id(context) for context, _, _ in seen.given[before:]} == {id(resumed)}


def test_two_runs_at_once_through_one_graph_each_get_their_own_settings(seen, pool, tmp_path):
    memory = seeded(pool)
    graph = build_mtl_graph(None, pool, memory_type="insight", online=False, run_log=tmp_path / "runs.jsonl")
    model = f"scripted:{SCRIPT}"  # each run's model comes from its context
    contexts = [MTLContext(model=model, top_k=1), MTLContext(model=model, memory_type="none")]
    start = threading.Barrier(2)

    def run(context):
        start.wait()
        return graph.invoke({"task": SLUGIFY}, context=context)

    with ThreadPoolExecutor(2) as pool_of_threads:
        outs = list(pool_of_threads.map(run, contexts))
    assert [o["verdict"]["status"] for o in outs] == ["pass", "pass"]
    assert [[r["id"] for r in o["retrieved"]] for o in outs] == [[memory.id], []]
    assert seen.resolved == 2
    by_context = seen.by_context()
    assert set(by_context) == {id(c) for c in contexts} and all(len(ids) == 1 for ids in by_context.values())
    for context, cfg, _ in seen.given:
        assert cfg.retrieval.memory_type == ("insight" if context is contexts[0] else "none")


# ---------------------------------------------------------------------- contexts of other hosts
def test_a_host_s_dict_context_is_resolved_once_per_dict(seen, pool):
    nodes = nodes_of(pool)
    context = {"top_k": 2, "user_id": "u-1", "thread_settings": {"theme": "dark"}}  # an agent's own keys too
    runtime = Runtime(context=context)
    cfg = nodes.settings(runtime)
    assert cfg.retrieval.top_k == 2 and nodes.settings(runtime) is cfg and seen.resolved == 1
    other = nodes.settings(Runtime(context=dict(context)))  # an equal dict is another run's
    assert other == cfg and other is not cfg and seen.resolved == 2
    context["top_k"] = 4
    assert nodes.settings(runtime).retrieval.top_k == 4 and seen.resolved == 3
    context["user_id"] = "u-2"  # not ours: the settings stay what they were
    assert nodes.settings(runtime) is nodes.settings(runtime) and seen.resolved == 3
    assert nodes.settings(None) is nodes.config and nodes.settings(Runtime(context=None)) is nodes.config


def test_a_bad_context_is_still_one_settings_error_line_each_time(seen, pool):
    nodes = nodes_of(pool)
    bad = Runtime(context={"top_k": "many", "user_id": "u-1"})
    for _ in range(2):  # an error is raised again, never kept as the run's settings
        with pytest.raises(SettingsError, match=r"^run context: invalid top_k 'many'") as raised:
            nodes.settings(bad)
        assert "\n" not in str(raised.value)
    assert seen.resolved == 2 and len(nodes.services._settings) == 0
    with pytest.raises(SettingsError, match=r"^run context: unknown setting top_kk"):
        MTLContext(top_kk=1)


def test_the_run_s_agent_settings_and_retries_are_derived_once(pool):
    agent = DefaultAgent()
    nodes = nodes_of(pool, agent)
    runtime = Runtime(context=MTLContext(retry=RetrySettings(attempts=5), step_limit=7))
    retry = nodes.retry_for(runtime)
    assert retry.attempts == 5 and nodes.retry_for(runtime) is retry
    cfg = nodes.settings(runtime)
    assert nodes.agent_for(cfg) is nodes.agent_for(cfg) and nodes.agent_for(cfg).config.step_limit == 7
    assert nodes.agent_for(nodes.config) is agent  # the build's settings: the agent itself
    assert nodes.retry_for(None) == agent.config.retry


# ---------------------------------------------------------------------- the owners
def test_mtl_pool_s_pool_is_opened_once_however_many_runs_start_together(tmp_path):
    opened, lock = [], threading.Lock()

    def slow_open():
        with lock:
            opened.append(1)
        threading.Event().wait(0.05)  # a slow open: the other threads arrive meanwhile
        return open_default_pool()

    source = PoolSource(None, slow_open)
    assert source.opened is None
    start = threading.Barrier(8)

    def get(namespace):
        start.wait()
        return source.get(namespace)

    with ThreadPoolExecutor(8) as threads:
        pools = list(threads.map(get, [None] * 4 + ["team-a"] * 4))
    base, view = pools[0], pools[-1]
    assert len(opened) == 1 and source.opened is base and str(base.location) == str(tmp_path / "default-pool")
    assert all(p is base for p in pools[:4]) and all(p is view for p in pools[4:]) and view.namespace == "team-a"
    assert source.get("team-a") is view and source.get(base.namespace) is base


def test_a_graph_built_without_a_pool_opens_mtl_pool_s_on_its_first_run(seen, tmp_path):
    out = scripted_graph(None, memory_type="insight", run_log=tmp_path / "runs.jsonl").invoke({"task": SLUGIFY})
    assert out["verdict"]["status"] == "pass"
    nodes = seen.given[0][2]
    assert str(nodes.pool.location) == str(tmp_path / "default-pool") and nodes.pool_of() is nodes.pool
    assert len(MemoryPool.open(tmp_path / "default-pool")) == len(out["new_memory_ids"]) == 1


def test_the_memo_is_bounded_and_gives_one_object_to_threads_that_race():
    made, lock = [], threading.Lock()

    def make(key):
        with lock:
            made.append(key)
        threading.Event().wait(0.02)
        return object()

    memo = RunMemo(limit=3)
    keys = [{"n": i} for i in range(5)]
    for key in keys:
        memo.get(key, make)
    assert len(memo) == 3 and len(made) == 5
    memo.get(keys[0], make)  # forgotten (the oldest): made again
    assert len(made) == 6
    shared = {"n": "shared"}
    start = threading.Barrier(8)

    def get(_):
        start.wait()
        return memo.get(shared, make)

    with ThreadPoolExecutor(8) as threads:
        values = list(threads.map(get, range(8)))
    assert all(v is values[0] for v in values)
