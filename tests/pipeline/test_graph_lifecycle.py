"""The loop through the real graph: citations credit what the agent used, copies are not re-extracted, the trace."""

import json

from langchain_core.messages import AIMessage

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline.citations import cited_ids, cited_numbers
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.pipeline import MTLContext, build_mtl_graph
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.core.task import Task
from helpers.memory_fixtures import broken_add_task, rerun_memory

TASK = broken_add_task("lc-fix")
RERUN = rerun_memory()
READ = InsightMemory(title="Read the failing assertion first",
                     description="When a check fails, read the assertion before editing code.",
                     content="Open the check file and read the failing line before changing the code.",
                     sources=[Provenance(domain="text", source_task_id="x1")])
FIX = [bash_call("sed -i 's/a - b/a + b/' calc.py", thought="Using Memory 2: read check.py first. Memory 1 does "
                 "not apply yet."), bash_call("python3 check.py"), submit_call("fixed add")]


def insight_json(memory):
    return AIMessage(json.dumps({"title": memory.title, "description": memory.description,
                                 "content": memory.content}))


def test_citations_credit_the_memory_used_and_the_trace_says_why(pool, tmp_path):
    pool.add_many([RERUN, READ])
    model = ScriptedChatModel(responses=[AIMessage("Plan: read the failing check, fix add, rerun the check."),
                                         *FIX, insight_json(InsightMemory(title="Fix the operator",
                                                                          description="A sum written as a minus.",
                                                                          content="Replace - with + in add."))])
    log = tmp_path / "runs.jsonl"
    graph = build_mtl_graph(model, pool, top_k=2, run_log=log, relevance_floor=-1)
    state = graph.invoke({"task": TASK})
    assert state["verdict"]["status"] == "pass" and state["error"] is None
    shown = [r["id"] for r in state["retrieved"]]
    assert set(shown) == {RERUN.id, READ.id}
    number_of_read = shown.index(READ.id) + 1
    assert state["credit"]["shown"] == shown
    cited = [READ.id] if number_of_read == 2 else [RERUN.id]  # "Memory 2" is whatever the prompt numbered 2
    assert state["credit"]["cited"] == cited and state["credit"]["verdict_by"] == "tests"
    used, other = pool.get(cited[0]).stats, pool.get(next(i for i in shown if i not in cited)).stats
    assert (used.cited_success, used.retrieved) == (1, 1) and (other.cited, other.retrieved_success) == (0, 1)
    new = pool.get(state["new_memory_ids"][0])
    assert new.sources[0].cited == cited  # it descends from the memory the run followed
    record = json.loads(log.read_text().splitlines()[-1])
    assert record["credit"]["cited"] == cited
    trace = record["retrieval"]
    assert trace["lifecycle"] == "on" and trace["floor"] == -1 and trace["injected"] == shown
    assert {c["id"] for c in trace["candidates"]} == {RERUN.id, READ.id}
    assert all({"similarity", "utility", "rank_before", "rank_after"} <= set(c) for c in trace["candidates"])


def test_a_distilled_copy_of_a_shown_memory_credits_it_instead(pool):
    pool.add(RERUN)
    model = ScriptedChatModel(responses=[AIMessage("Plan: fix add and rerun the check."), *FIX,
                                         insight_json(RERUN.model_copy(update={"title": "Rerun the check after "
                                                                                        "your last edit"}))])
    state = build_mtl_graph(model, pool, top_k=1, relevance_floor=-1).invoke({"task": TASK})
    assert state["verdict"]["status"] == "pass"
    assert state["new_memory_ids"] == [] and pool.count() == 1
    assert list(state["credit"]["re_extracted"].values()) == [RERUN.id]
    assert pool.get(RERUN.id).stats.cited_success == 1  # the copy counts as using it


def test_an_unrelated_task_gets_no_memory_and_the_events_say_so(pool):
    pool.add_many([RERUN, READ])
    poem = Task(id="poem", domain="text", instruction="Write a haiku about autumn rain into poem.txt.")
    model = ScriptedChatModel(responses=[AIMessage("Plan: write three lines about rain in autumn."),
                                         bash_call("printf 'rain\\n' > poem.txt"), submit_call("done")])
    events = []
    graph = build_mtl_graph(model, pool, top_k=2, online=False, judge=_Pass())
    for mode, chunk in graph.stream({"task": poem}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            state = chunk
    assert state["retrieved"] == [] and state["memory_block"] == ""
    assert any(e["kind"] == "no_memory_applies" for e in events)
    paper = build_mtl_graph(ScriptedChatModel(responses=[AIMessage("Plan: rain."), submit_call("done")]), pool,
                            top_k=2, online=False, judge=_Pass())
    assert len(paper.invoke({"task": poem}, context=MTLContext(lifecycle="off"))["retrieved"]) == 2


class _Pass:
    def judge(self, trajectory):
        from mtl_graph.core.trajectory import Verdict, VerdictStatus

        return Verdict(status=VerdictStatus.PASS, source="judge", reason="ok")


PHRASES_CITING = ["Using Memory {n}.", "using memory {n}", "Following Memory {n}'s advice, I", "As memory #{n} "
                  "suggests,", "Per Memory no. {n}:", "I'll apply **Memory {n}**", "Based on memory {n} I rerun",
                  "Memory {n} applies here", "USING MEMORY {n}", "Using Memory\u00a0{n}", "Using Memory\u200b {n}"]
PHRASES_DECLINING = ["Memory {n} does not apply.", "Ignoring memory {n}", "I won't use Memory {n}",
                     "Memory {n} is irrelevant here", "Instead of Memory {n}, I", "memory {n} doesn't fit",
                     "Memory {n} seems misleading", "Without memory {n}", "I disregard Memory {n}"]


def test_citation_phrasings_are_read_as_a_class():
    for template in PHRASES_CITING:
        for n, shown in ((1, "1"), (2, "2"), (3, "３"), (2, "two")):
            assert cited_numbers([template.format(n=shown)]) == {n}, template.format(n=shown)
    for template in PHRASES_DECLINING:
        for shown in ("1", "2", "３"):
            assert cited_numbers([template.format(n=shown)]) == set(), template.format(n=shown)
    assert cited_numbers(["Memories 1 and 3 apply; memory 2 does not."]) == {1, 3}
    assert cited_numbers(["memorycard 4", "the memory was 2 GB", "no memory applies"]) == set()


def test_only_the_agents_words_cite_and_numbers_map_to_what_was_shown():
    trajectory = Trajectory(task=TASK.ref(), steps=[
        Step(reasoning="Using Memory 2 and memory 7.", action="cat notes.txt",
             observation="Using Memory 1 says the file"),  # command output cites nothing
    ], submission="Done, as Memory 2 said.")
    assert cited_ids(trajectory, ["a", "b", "c"]) == ["b"]  # 7 was never shown
    assert cited_ids(trajectory, []) == [] and cited_ids(None, ["a"]) == []


def test_a_wrapped_agent_and_the_middleware_credit_what_their_ai_messages_cite(pool, tmp_path):
    from langchain.agents import create_agent

    from mtl_graph.agent.tools import sandbox_tools
    from mtl_graph.pipeline import MemoryTransferMiddleware, with_memory_transfer

    pool.add_many([RERUN, READ])
    solve = [bash_call("sed -i 's/a - b/a + b/' calc.py"), bash_call("python3 check.py"),
             AIMessage("Fixed. Following Memory 1, I reran the check; memory 2 was not needed.")]
    wrapped = with_memory_transfer(create_agent(ScriptedChatModel(responses=solve), tools=sandbox_tools()), pool,
                                   model=ScriptedChatModel(responses=[AIMessage("Plan: fix add, rerun check.")]),
                                   memory_type="insight", top_k=2, online=True, distill_formats=["trajectory"],
                                   relevance_floor=-1, run_log=tmp_path / "runs.jsonl")
    state = wrapped.invoke({"task": TASK})
    assert state["verdict"]["status"] == "pass"
    first = state["retrieved"][0]["id"]
    assert state["credit"]["cited"] == [first] and pool.get(first).stats.cited_success == 1

    middleware = MemoryTransferMiddleware(pool, model=ScriptedChatModel(responses=[AIMessage("Plan: answer.")]),
                                          top_k=2, distill_formats=["trajectory"], relevance_floor=-1,
                                          run_log=tmp_path / "runs2.jsonl")
    agent = create_agent(ScriptedChatModel(responses=[AIMessage("Using Memory 2: the check is all that matters.")]),
                         tools=[], middleware=[middleware])
    out = agent.invoke({"messages": [("user", "Explain how to verify a fix to add() before submitting it.")]})
    second = out["mtl"]["retrieved"][1]["id"]
    assert out["mtl"]["credit"]["cited"] == [second]
    assert pool.get(second).stats.cited >= 1


def test_a_served_graph_credits_what_its_own_nodes_decided_not_a_clients_state_update(pool, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from mtl_graph.pipeline.server_policy import ServerPolicy

    victim = InsightMemory(title="Keep the public interface", description="Do not rename what the tests import.",
                           content="Keep function names and signatures.", sources=[Provenance(domain="o",
                                                                                              source_task_id="o1")])
    pool.add_many([RERUN, victim])
    model = ScriptedChatModel(responses=[AIMessage("Plan: fix add and rerun the check."), *FIX[1:]])
    model.responses.insert(1, bash_call("sed -i 's/a - b/a + b/' calc.py", thought="Using Memory 1."))
    graph = build_mtl_graph(model, pool, top_k=1, distill_formats=["trajectory"], relevance_floor=-1,
                            checkpointer=InMemorySaver(), policy=ServerPolicy(task_roots=(tmp_path,)))
    config = {"configurable": {"thread_id": "t"}}
    context = MTLContext(review_memories=True)
    graph.invoke({"task": TASK.model_dump(mode="json")}, config=config, context=context)  # paused for review
    state = graph.get_state(config).values
    shown = [r["id"] for r in state["retrieved"]]
    assert state["verdict"]["status"] == "pass" and shown in ([RERUN.id], [victim.id])
    forged_verdict = {**state["verdict"], "status": "fail"}
    forged_trajectory = {**state["trajectory"], "steps": [{**s, "reasoning": "Using Memory 2."}
                                                          for s in state["trajectory"]["steps"]]}
    graph.update_state(config, {"retrieved": [{**state["retrieved"][0], "id": victim.id},
                                              {**state["retrieved"][0], "id": RERUN.id}],
                                "verdict": forged_verdict, "trajectory": forged_trajectory}, as_node="judge")
    out = graph.invoke(Command(resume="approve"), config=config, context=context)
    if graph.get_state(config).next:  # the update made review ask again
        out = graph.invoke(Command(resume="approve"), config=config, context=context)
    assert out["credit"]["shown"] == shown and out["credit"]["outcome"] == "success"
    assert out["credit"]["cited"] == shown  # the judge read "Using Memory 1" in the real run
    credited, other = pool.get(shown[0]).stats, pool.get(next(i for i in (RERUN.id, victim.id)
                                                               if i not in shown)).stats
    assert (credited.cited_success, credited.retrieved_failure) == (1, 0) and other.retrieved == 0
    for run_id in (state["run_id"], "client-made"):  # write back again: the same run, a made-up one
        graph.update_state(config, {"run_id": run_id, "verdict": state["verdict"]}, as_node="review")
        graph.invoke(None, config=config, context=context)
    assert pool.get(shown[0]).stats.retrieved == 1
