"""Consolidation (near-duplicates merged, originals archived, records summed) and pruning, on a real pool."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from helpers.fake_models import RoutedChatModel
from mtl_graph.memory.lifecycle.consolidate import (PruneConfig, apply, find_clusters, propose, propose_all, prune,
                                          representative, stale)
from mtl_graph.memory.base import COUNTS, Provenance, UsageStats
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.trajectory import TrajectoryMemory, TrajectoryStep
from mtl_graph.memory.formats.workflow import WorkflowMemory
from mtl_graph.memory.usage import Use

runner = CliRunner()

LESSON = [  # one lesson, paraphrased by three runs of three tasks
    ("Run the tests before submitting", "Applies when you have edited code and are about to submit."),
    ("Run the test suite before you submit",
     "Applies when code was edited and the work is about to be submitted."),
    ("Always run the tests before submitting", "Applies after editing code, just before submitting the work."),
]
MERGED = {"title": "Run the tests before submitting",
          "description": "Applies whenever code was edited and the work is about to be submitted.",
          "content": "Run the full test suite after the last edit. Submit only once it passes."}


def insight(title: str, description: str, task: str, outcome: str = "success", **kw) -> InsightMemory:
    return InsightMemory(title=title, description=description, content=f"Advice learned on {task}.",
                         outcome=outcome, sources=[Provenance(run_id=f"run-{task}", source_task_id=task,
                                                              domain="demo")], **kw)


def trajectory(task: str, command: str) -> TrajectoryMemory:
    return TrajectoryMemory(task=task, steps=[TrajectoryStep(command=command, observation="ok", exit_code=0)],
                            outcome="success", sources=[Provenance(run_id=f"run-{command}", source_task_id=command)])


@pytest.fixture
def seeded(pool):
    """Three paraphrased insights (one with stored counts from an import), unrelated ones, the same lesson from a
    failed run, two near-duplicate trajectories and two near-duplicate workflows; credit entries on several."""
    dupes = [insight(t, d, f"task-{n}") for n, (t, d) in enumerate(LESSON)]
    dupes[0] = dupes[0].model_copy(update={"stats": UsageStats(retrieved=4, retrieved_success=3,
                                                               retrieved_failure=1, cited=2, cited_success=2)})
    others = [insight("Respect the exact output format",
                      "Applies when a task specifies how the program must print its result.", "task-9"),
              insight("Read the traceback from the bottom",
                      "Applies when a command fails with a Python exception.", "task-8"),
              insight(*LESSON[0], "task-7", outcome="failure")]
    trajs = [trajectory("Fix a failing unit test", "pytest -x"), trajectory("Fix one failing unit test", "make test")]
    flows = [WorkflowMemory(goal=g, actions=["run the test", "read the traceback", "edit", "rerun"],
                            outcome="success", sources=[Provenance(run_id=f"run-w{n}")])
             for n, g in enumerate(["Fix a failing unit test in a Python project",
                                    "Fix one failing unit test in a Python project."])]
    pool.add_many([*dupes, *others, *trajs, *flows], keep_stats=True)
    ids = {"dupes": sorted(m.id for m in dupes), "others": [m.id for m in others],
           "trajs": [m.id for m in trajs], "flows": sorted(m.id for m in flows)}
    for run, uses, outcome in [("r1", [Use(dupes[1].id, True), Use(others[0].id, False)], "success"),
                               ("r2", [Use(dupes[1].id, False), Use(dupes[2].id, True)], "failure"),
                               ("r3", [Use(trajs[1].id, True)], "success"),
                               ("r4", [Use(trajs[1].id, False), Use(trajs[0].id, False)], "success")]:
        pool.credit(run, uses, outcome, "tests")
    return ids


def model(workflow_answer=None) -> RoutedChatModel:
    good = {"WorkflowDraft": {"goal": "Fixing a failing unit test in a project with a test suite.",
                              "actions": ["Run the failing test.", "Read the traceback.", "Edit the code.",
                                          "Rerun the test."]}}
    answers = {"InsightDraft": MERGED, **good}
    if workflow_answer is not None:
        answers["WorkflowDraft"] = workflow_answer
    return RoutedChatModel(route=lambda tool, messages: answers[tool or ""], model_name="merge-test")


def dump(pool) -> dict:
    """Every point's whole payload (memory JSON, statuses and credit entries)."""
    return {hit.id: hit.payload for hit in pool.store.scroll()}


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_clusters_per_type_and_outcome_deterministic(pool, seeded) -> None:
    clusters = find_clusters(pool)
    assert [(c.type.value, c.ids) for c in clusters] == [
        ("insight", seeded["dupes"]), ("trajectory", sorted(seeded["trajs"])), ("workflow", seeded["flows"])]
    assert all(0.8 < c.similarity <= 1.0 for c in clusters)  # the weakest pair of the single-link chain
    assert [c.ids for c in find_clusters(pool)] == [c.ids for c in clusters]
    assert [c.ids for c in find_clusters(pool, "insight")] == [seeded["dupes"]]
    assert find_clusters(pool, "insight", threshold=0.99) == []


def test_dry_run_changes_nothing(pool, seeded) -> None:
    before = dump(pool)
    chat = model()
    proposals = propose_all(find_clusters(pool), chat)
    assert [p.error for p in proposals] == ["", "", ""] and len(chat.calls) == 2  # the trajectory needs none
    prompt = chat.calls[0][-1].content
    assert "Run the test suite before you submit" in prompt and "│ " in prompt  # the originals quoted as data
    result = invoke("pool", "consolidate", "--pool", pool.location, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["dry_run"] and [c["ids"] for c in shown["clusters"]][0] == seeded["dupes"]
    assert shown["clusters"][0]["error"].startswith("needs --model")
    assert shown["clusters"][1]["proposal"]["consolidated_from"]  # a trajectory is proposed without a model
    result = invoke("pool", "consolidate", "--pool", pool.location)
    assert result.exit_code == 0 and "dry run: 3 cluster(s), 7 memories; nothing changed" in result.output
    assert dump(pool) == before


def test_apply_merges_archives_and_sums_records(pool, seeded) -> None:
    originals = [pool.get(i) for i in seeded["dupes"]]
    [cluster] = find_clusters(pool, "insight")
    report = apply(pool, [propose(cluster, model())])
    [(ids, new_id)] = report.applied
    assert ids == seeded["dupes"] and not report.failed
    merged = pool.get(new_id)
    assert (merged.title, merged.content) == (MERGED["title"], MERGED["content"])
    assert merged.consolidated_from == seeded["dupes"] and merged.status == "active"
    assert merged.source_task_ids == ["task-0", "task-1", "task-2"]
    expected = {name: sum(getattr(m.stats, name) for m in originals) for name in COUNTS}
    assert {name: getattr(merged.stats, name) for name in COUNTS} == expected
    assert (expected["retrieved"], expected["cited"], expected["cited_success"]) == (7, 4, 3)
    for original in originals:
        kept = pool.get(original.id)
        assert kept.archived == f"consolidated into {new_id}" and kept.stats == original.stats
    found = {h.memory.id for h in pool.search("run the tests before submitting", type="insight", k=10)}
    assert new_id in found and not found & set(seeded["dupes"])
    assert pool.count() == 11  # nothing deleted: the 10 seeded and the merged memory
    again = find_clusters(pool, "insight")
    assert again == [] and apply(pool, propose_all(again, model())).applied == []


def test_trajectory_representative_keeps_its_place(pool, seeded) -> None:
    a, b = (pool.get(i) for i in seeded["trajs"])
    assert representative([a, b]).id == b.id  # the one with a cited success
    [cluster] = find_clusters(pool, "trajectory")
    result = invoke("pool", "consolidate", "--type", "trajectory", "--apply", "--json", "--pool", pool.location)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["applied"] == [{"originals": cluster.ids, "into": b.id}]
    kept, gone = pool.get(b.id), pool.get(a.id)
    assert kept.status == "active" and kept.consolidated_from == [a.id]
    assert (kept.stats.retrieved, kept.stats.cited, kept.stats.cited_success) == (3, 1, 1)  # each run once
    assert gone.archived == f"consolidated into {b.id}" and gone.stats.retrieved == 1
    assert find_clusters(pool, "trajectory") == []


def test_a_malformed_answer_fails_its_cluster_only(pool, seeded) -> None:
    flows_before = {i: pool.get(i) for i in seeded["flows"]}
    proposals = propose_all(find_clusters(pool), model(workflow_answer="Sure! Here is the workflow: {oops"))
    report = apply(pool, proposals)
    assert [ids for ids, _ in report.applied] == [seeded["dupes"], sorted(seeded["trajs"])]
    [(ids, why)] = report.failed
    assert ids == seeded["flows"] and why.startswith("no valid answer from the model")
    assert {i: pool.get(i) for i in seeded["flows"]} == flows_before


def test_cli_bad_input_is_one_line_and_changes_nothing(pool, seeded) -> None:
    before = dump(pool)
    for args, message in [(["--type", "essay"], "error: --type: unknown memory type 'essay'"),
                          (["--threshold", "1.5"], "error: --threshold must be a cosine above 0"),
                          (["--threshold", "0"], "error: --threshold must be a cosine above 0"),
                          (["--apply"], "error: --model PROVIDER:MODEL is required with --apply")]:
        result = invoke("pool", "consolidate", *args, "--pool", pool.location)
        assert result.exit_code == 1 and result.output.startswith(message), (args, result.output)
        assert len(result.output.strip().splitlines()) == 1
    result = invoke("pool", "prune", "--min-shown", "0", "--pool", pool.location)
    assert result.exit_code == 1 and result.output.strip() == "error: --min-shown must be at least 1, not 0"
    with pytest.raises(ValueError, match="threshold"):
        find_clusters(pool, threshold=1.2)
    assert dump(pool) == before


def test_prune_archives_the_ignored_not_the_cited(pool) -> None:
    ignored = insight("Prefer small commits", "Applies when changing several files at once.", "task-p1")
    cited = insight("Check the exit status", "Applies when a command may fail silently.", "task-p2")
    pool.add_many([ignored, cited])
    for n in range(25):
        pool.credit(f"p{n}", [Use(ignored.id, False), Use(cited.id, n % 5 == 0)], "success", "tests")
    before = dump(pool)
    result = invoke("pool", "prune", "--json", "--pool", pool.location)
    assert result.exit_code == 0 and dump(pool) == before  # a dry run
    assert [s["id"] for s in json.loads(result.output)["stale"]] == [ignored.id]
    done = prune(pool, stale(pool, PruneConfig()))
    assert done == [ignored.id]
    reason = pool.get(ignored.id).archived
    assert reason == "pruned: shown 25 times, never cited (rule: shown >= 20 times without a citation)"
    assert pool.get(cited.id).status == "active" and stale(pool) == []


def test_a_merge_that_repeats_an_original_keeps_it_in_place(pool, seeded) -> None:
    first = pool.get(seeded["dupes"][0])
    originals = [pool.get(i) for i in seeded["dupes"]]
    echo = RoutedChatModel(route=lambda tool, messages: {"title": first.title, "description": first.description,
                                                         "content": first.content})
    [cluster] = find_clusters(pool, "insight")
    [(ids, new_id)] = apply(pool, [propose(cluster, echo)]).applied
    assert new_id == first.id and pool.count() == 10  # no second copy of its content
    kept = pool.get(first.id)
    assert kept.status == "active" and kept.consolidated_from == seeded["dupes"][1:]
    assert kept.stats.retrieved == sum(m.stats.retrieved for m in originals)  # its own entries counted once
    assert all(pool.get(i).archived == f"consolidated into {first.id}" for i in seeded["dupes"][1:])


def test_prune_from_records_alone_finds_what_whole_payloads_find(pool) -> None:
    """stale() reads each live memory's record fields only; on generated records (stored counts, credit entries,
    both, quarantined and archived memories) it finds exactly what reading every payload
    whole finds."""
    import random

    from mtl_graph.memory.lifecycle.consolidate import _live, usage_of
    from mtl_graph.memory.lifecycle.policy import LifecycleConfig, evidence, utility
    from mtl_graph.memory.pool.points import memory_of, payload_of

    rng = random.Random(4)

    def record() -> UsageStats:  # a consistent record: shown in runs that ended either way, some cited
        shown = rng.choice([0, 5, 19, 20, 40])
        failed = rng.randint(0, shown)
        cited_failure = rng.randint(0, failed) if rng.random() < 0.3 else 0
        cited_success = rng.randint(0, shown - failed) if rng.random() < 0.3 else 0
        return UsageStats(retrieved=shown, retrieved_failure=failed, retrieved_success=shown - failed,
                          cited=cited_success + cited_failure, cited_success=cited_success,
                          cited_failure=cited_failure)

    memories = [insight(f"Lesson {i}", f"Applies to case {i}.", f"task-r{i}", stats=record()) for i in range(60)]
    pool.add_many(memories, keep_stats=True)
    for n in range(30):  # credit entries on top of the stored counts
        pool.credit(f"r{n}", [Use(m.id, rng.random() < 0.1) for m in rng.sample(memories, 6)],
                    rng.choice(["success", "failure"]), "tests")
    held = pool.get(memories[0].id)
    pool.store.set_payload(held.id, payload_of(held.model_copy(update={"quarantined": ["held by a test"]})))
    pool.archive(memories[1].id, "archived by a test")

    def whole() -> list[tuple[str, str]]:  # the rule over every payload read whole (what stale() did before)
        config, lifecycle, out = PruneConfig(), LifecycleConfig(), []
        base = pool.base_rate().rate
        for hit in pool.store.scroll():
            memory = memory_of(hit)
            if not _live(memory):
                continue
            s = usage_of(hit.payload)
            if s.retrieved >= config.min_shown and s.cited == 0:
                out.append((memory.id, "shown"))
            elif evidence(s, lifecycle) >= config.min_evidence and \
                    utility(s, base, lifecycle) <= base - config.utility_margin:
                out.append((memory.id, "utility"))
        return sorted(out)

    expected = whole()
    found = stale(pool)
    assert len(expected) >= 5 and any(why == "utility" for _, why in expected)
    assert [(m.id, "shown" if why.startswith("pruned: shown") else "utility") for m, why in found] == expected
    assert all(m.stats == pool.get(m.id).stats for m, _ in found)  # whole memories, records included
