"""`langgraph dev` serves our graphs; a whole run goes through its HTTP API (scripted model, real everything else).

One server for the session (starting one takes seconds): each test asserts on what its own runs added to the
server's pool, run log and server log, counted from where they stood when it began."""

import json

import pytest

from helpers.paths import ROOT
from helpers.studio import log_lines


def pool_now(client) -> tuple[int, set[str]]:
    """The server's pool as the pool view sees it: how many memories, and the ids of those it lists."""
    view = client.runs.wait(None, "pool_view", input={"k": 200})
    assert view["error"] is None
    return view["stats"]["total"], {h["id"] for h in view["hits"]}


def test_studio_runs_the_graph_end_to_end(server):
    client, tmp_path = server
    logged, (total, before) = len(log_lines(tmp_path)), pool_now(client)
    assert {a["graph_id"] for a in client.assistants.search()} == {"scripted", "scripted_review", "scripted_stream",
                                                                    "scripted_context", "mtl", "pool_view",
                                                                    "blocking", "crashing"}
    thread = client.threads.create()
    out = client.runs.wait(thread["thread_id"], "scripted", input={"task": str(ROOT / "examples/tasks/slugify")},
                           context={"top_k": 2, "hold_one_out": True})
    assert out["error"] is None
    assert out["verdict"]["status"] == "pass" and out["verdict"]["source"] == "tests"
    assert len(out["new_memory_ids"]) == 1
    [line] = log_lines(tmp_path)[logged:]
    assert line["task"]["id"] == "examples/slugify"

    # Studio reuses the thread: the second run starts clean (its own messages, verdict and memories only)
    again = client.runs.wait(thread["thread_id"], "scripted", input={"task": str(ROOT / "examples/tasks/slugify")})
    assert again["verdict"]["status"] == "fail"  # the replay ran out: the stub stays unsolved
    assert "messages" not in again  # the output schema keeps the transcript inside; the thread's state has it
    inside = client.threads.get_state(thread["thread_id"])["values"]
    assert [m["type"] for m in inside["messages"]] == ["system", "human", "ai", "tool"]
    assert again["retrieved"] == [] and again["re_retrieved"] == [] and len(again["new_memory_ids"]) == 1

    # the pool view reads the pool the server process holds open (no second process could: it is locked)
    view = client.runs.wait(None, "pool_view", input={"query": "slugify", "format": "trajectory"})
    assert view["error"] is None and view["stats"]["total"] == total + 2  # one memory of each run
    hits = [h for h in view["hits"] if h["id"] not in before]
    assert {h["id"] for h in hits} == {*out["new_memory_ids"], *again["new_memory_ids"]}
    assert {h["outcome"] for h in hits} == {"success", "failure"}
    assert all(h["source_task_ids"] == ["examples/slugify"] for h in hits)
    bad = client.runs.wait(None, "pool_view", input={"k": -1})
    assert bad["hits"] == [] and bad["error"].startswith("invalid k")

    # the exported graph imports without a model and fails the run with a clear message
    # ... and Studio sees the run's events in the custom stream as they happen
    thread = client.threads.create()
    parts = list(client.runs.stream(thread["thread_id"], "mtl", input={"task": {"id": "x", "instruction": "do it"}},
                                    stream_mode=["custom", "values"]))
    events = [p.data for p in parts if p.event == "custom"]
    out = [p.data for p in parts if p.event == "values"][-1]
    assert "no chat model configured" in out["error"]
    assert [e["kind"] for e in events] == ["warning", "plan", "retrieved", "retrieval", "no_memory_applies", "verdict"]
    assert events[0]["message"].startswith("planning failed") and events[1]["query"] == "do it"
    assert events[-1]["status"] == "error" and "no chat model configured" in events[-1]["reason"]


def pending_review(client, thread_id) -> dict:
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    [pending] = state["interrupts"]
    return pending["value"]


def test_studio_pauses_for_memory_review_and_resumes_with_edits(server):
    client, tmp_path = server
    logged, (total, before) = len(log_lines(tmp_path)), pool_now(client)
    [assistant] = [a for a in client.assistants.search() if a["graph_id"] == "scripted_review"]
    drawn = client.assistants.get_graph(assistant["assistant_id"])  # what Studio draws
    edges = {(e["source"], e["target"]) for e in drawn["edges"]}
    assert {("distill", "review"), ("distill", "write_back"), ("review", "write_back"), ("plan", "write_back"),
            ("execute", "write_back"), ("judge", "write_back")} <= edges
    task = str(ROOT / "examples/tasks/slugify")
    thread = client.threads.create()["thread_id"]
    paused = client.runs.wait(thread, "scripted_review", input={"task": task}, context={"review_memories": True})
    assert paused["verdict"]["status"] == "pass" and paused["new_memory_ids"] == []
    request = pending_review(client, thread)
    assert request["kind"] == "review_memories" and request["task_id"] == "examples/slugify"
    [proposed] = request["memories"]
    assert proposed["type"] == "trajectory" and len(log_lines(tmp_path)) == logged

    # a bad answer: asked again with the reason, nothing written, nothing lost
    client.runs.wait(thread, "scripted_review", command={"resume": {"decisions": ["approve", "approve"]}})
    again = pending_review(client, thread)
    assert again["error"] == "2 decisions for 1 proposed memories: give one per memory"
    assert again["memories"] == [proposed]
    assert pool_now(client) == (total, before)

    edited_task = "Rewrite slugify so that the unit tests in test_slug.py pass."
    edit = {"type": "edit", "memory": {"task": edited_task}}
    done = client.runs.wait(thread, "scripted_review", command={"resume": edit})
    [written] = done["new_memory_ids"]
    assert done["reviewed"] == {"approved": [], "edited": [written], "rejected": []} and written != proposed["id"]
    view = client.runs.wait(None, "pool_view", input={"k": 200})
    assert [(h["id"], h["memory"]["task"]) for h in view["hits"] if h["id"] not in before] == [(written, edited_task)]
    [line] = log_lines(tmp_path)[logged:]
    assert line["reviewed"] == done["reviewed"]


def test_studio_runs_never_block_its_event_loop_and_crashes_show_as_failed(server):
    """`langgraph dev` raises on blocking calls in async code: a full MTL run goes through it (sync nodes run in
    worker threads), while the canary graph's blocking async node is refused. A run that crashes fails visibly."""
    client, tmp_path = server
    server_log = tmp_path / "server.log"
    seen = len(server_log.read_text())
    thread = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread, "scripted_stream", input={"task": str(ROOT / "examples/tasks/slugify")},
                                    stream_mode=["custom", "values"]))
    kinds = [p.data["kind"] for p in parts if p.event == "custom"]
    out = [p.data for p in parts if p.event == "values"][-1]
    assert out["error"] is None and out["verdict"]["status"] == "pass" and len(out["new_memory_ids"]) == 1
    assert kinds[:2] == ["plan", "retrieved"] and kinds[-2:] == ["verdict", "written"]
    assert "BlockingError" not in server_log.read_text()[seen:]
    with pytest.raises(Exception, match="BlockingError"):
        client.runs.wait(None, "blocking", input={})
    assert "BlockingError" in server_log.read_text()[seen:]

    # a run that crashes (a distiller bug) is logged, then shown as failed
    crashed = client.threads.create()["thread_id"]
    run = client.runs.create(crashed, "crashing", input={"task": str(ROOT / "examples/tasks/slugify")})
    client.runs.join(crashed, run["run_id"])
    assert client.runs.get(crashed, run["run_id"])["status"] == "error"
    line = json.loads((tmp_path / "runs.jsonl").read_text().splitlines()[-1])
    assert line["error"] == "distill raised RuntimeError: distiller bug" and line["verdict"]["status"] == "error"
    assert line["task"]["id"] == "examples/slugify" and len(line["steps"]) == 4
