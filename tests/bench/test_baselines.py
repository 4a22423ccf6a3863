"""The baselines as conditions of one task sequence through the real graph: ReasoningBank (items from successes
and failures, same-domain, task query behind an instruction prefix, no plan), AWM (workflows from successes
only, same-domain), MTL (insights from any domain) and MTL with the lifecycle; the report shows pass@k, the pool
at the end, memories retrieved and the extra model calls and tokens per run."""

import json

import pytest

from mtl_graph.bench import baselines as bl
from mtl_graph.bench import learning_sequences as ls
from helpers.paths import EXAMPLES


def eval_baselines(*argv):
    """`mtl eval-baselines ARGV` (the one entry point of the baselines)."""
    from typer.testing import CliRunner

    from mtl_graph.cli import app

    return CliRunner().invoke(app, ["eval-baselines", *map(str, argv)])

def _specs():
    specs = ls.make_tasks(12, prefix="bl")
    fails = next(s for s in specs if s.second_fix and not s.verifies_alone)  # fails unless a memory says verify
    learns = next(s for s in specs if s.second_fix and s.verifies_alone)  # verifies alone: passes, teaches
    rest = [s for s in specs if s not in (fails, learns) and s.second_fix][:2]
    return [fails, learns, *rest]


@pytest.fixture(scope="module")
def result(tmp_path_factory, embeddings):
    from mtl_graph.memory.pool.pool import MemoryPool

    root, made = tmp_path_factory.mktemp("baselines"), iter(range(100))
    specs = _specs()
    by_id = {s.task.id: s for s in specs}

    def pool_factory():
        pool = ls.starting_pool(MemoryPool.open(root / f"pool-{next(made)}", embeddings), "positive")
        pool.add_many(ls.foreign_lessons())
        return pool

    log = root / "runs.jsonl"
    out = bl.run_baselines([s.task for s in specs], pool_factory, lambda task: ls.agent_for(by_id[task.id]),
                           attempts=2, sandbox="local", run_log=log)
    return out, [json.loads(line) for line in log.read_text().splitlines()], root


def test_reasoningbank_appends_items_from_every_run_keyed_by_task_same_domain_without_a_plan(result):
    out, records, _ = result
    rb = out.attempts["reasoningbank"]
    first = rb[0].runs
    assert [r.passed for r in first] == [False, True, True, True]  # learns from the second run, then follows it
    assert first[0].injected == []  # the foreign lesson is never served: same-domain
    assert [len(r.injected) for r in first[1:]] == [1, 2, 3]  # one memory of each earlier run, no merging
    assert all(c.pool_size_end == 1 + 4 for c in rb)  # the foreign one + one per run, failures included
    assert out.items_end["reasoningbank"] == [5, 5]
    runs = [r for r in records if r["memory_type"] == "reasoningbank"]
    assert all(r["query"].startswith("Instruct: ") and r["query"].endswith(r["task"]["instruction"]) for r in runs)
    assert all("plan" not in r["cost"] and r["cost"]["distill"]["calls"] == 1 for r in runs)
    assert all(set(h["domains"]) == {"python"} for r in runs for h in r["retrieved"])


def test_awm_learns_from_successes_only_and_stays_in_its_domain(result):
    out, records, _ = result
    awm = out.attempts["awm"][0].runs
    assert [r.passed for r in awm] == [False, True, True, True] and awm[0].injected == []
    runs = [r for r in records if r["memory_type"] == "workflow"]
    assert all(r["new_memory_ids"] == [] and "distill" not in r["cost"]
               for r in runs if r["verdict"]["status"] != "pass")  # a failed run distils nothing: no call
    assert all(r["cost"]["distill"]["calls"] == 1 and r["cost"]["plan"]["calls"] == 1
               for r in runs if r["verdict"]["status"] == "pass")
    assert out.summary()["awm"]["pool_size_end"] == 2  # the foreign one + the verify workflow (merged)


def test_mtl_transfers_across_domains_and_the_lifecycle_keeps_the_pool_small(result):
    out, _, _ = result
    s = out.summary()
    for name in ("mtl", "mtl+lifecycle"):
        runs = out.attempts[name][0].runs
        assert all(r.passed for r in runs)  # the foreign lesson serves from the first run
        assert s[name]["pass@1"] == 1.0 and s[name]["pass@2"] == 1.0
    assert s["reasoningbank"]["pass@1"] == 0.75 == s["awm"]["pass@1"]
    assert s["mtl+lifecycle"]["pool_size_end"] <= s["mtl"]["pool_size_end"] < s["reasoningbank"]["pool_size_end"]
    assert s["reasoningbank"]["extra_calls_per_run"] == 1 and s["mtl"]["extra_calls_per_run"] == 2  # plan + distil
    assert s["awm"]["extra_calls_per_run"] == 1.75  # no distil call for its failed run
    assert all(v["extra_input_tokens_per_run"] > 0 and v["agent_calls_per_run"] > 0 for v in s.values())


def test_the_report_puts_pass_rates_beside_pool_and_cost(result):
    out, _, root = result
    paths = bl.write_report(out, root / "report")
    table = paths["md"].read_text()
    assert "| condition | pass@1 | pass@k | pool at end (memories / items) | retrieved per run | extra calls" in table
    assert "| reasoningbank | 75% | 75% (k=2) | 5 / 5 | 1.5 | 1 |" in table
    assert "| mtl | 100% |" in table and "reasoningbank: distill 1;" in table
    data = json.loads(paths["json"].read_text())
    assert set(data["summary"]) == set(bl.DEFAULT_CONDITIONS) and len(data["runs"]["awm"]) == 2
    assert data["runs"]["mtl"][0][0]["cost"]["plan"]["calls"] == 1
    assert paths["png"].stat().st_size > 1000


def test_bad_input_is_one_clear_line(tmp_path, embeddings):
    with pytest.raises(ValueError, match=r"^unknown condition 'frozen'; choose one of reasoningbank, awm, mtl, "
                                         r"mtl\+lifecycle, mtl\+tool$"):
        bl.run_baselines([ls.make_tasks(1)[0].task], lambda: None, ls.agent_for, ["mtl", "frozen"])
    with pytest.raises(ValueError, match="at least one task"):
        bl.run_baselines([], lambda: None, ls.agent_for, ["mtl"])
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        bl.run_baselines([ls.make_tasks(1)[0].task], lambda: None, ls.agent_for, attempts=0)
    for argv, line in ((["--condition", "frozen"],
                        "unknown condition 'frozen'; choose one of reasoningbank, awm, mtl, mtl+lifecycle, mtl+tool"),
                       (["--tasks", "0"], "a sequence has 1 to 40 tasks, not 0"),
                       (["--attempts", "0"], "attempts must be at least 1, not 0"),
                       (["--start", "empty"], "unknown starting pool 'empty'; choose positive or transfer")):
        result = eval_baselines(*argv, "--out", tmp_path / "bad")
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().splitlines() == [f"error: {line}"]
        assert not (tmp_path / "bad").exists()  # nothing written


def test_mtl_eval_baselines_runs_the_scripted_sequence_and_writes_the_report(tmp_path):
    from typer.testing import CliRunner

    from mtl_graph.cli import app

    result = CliRunner().invoke(app, ["eval-baselines", "--condition", "reasoningbank", "--condition", "mtl",
                                      "--tasks", "2", "--start", "transfer", "--sandbox", "local", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"baselines.json", "baselines.md", "baselines.png",
                                                               "runs.jsonl"}
    assert "| reasoningbank |" in result.output and "| awm |" not in result.output
    summary = json.loads((tmp_path / "out" / "baselines.json").read_text())["summary"]
    assert summary["mtl"]["pass@1"] == 1.0  # the other domain's lesson serves MTL from the first run


def test_a_suite_runs_under_the_baselines_with_a_model_from_a_copied_starting_pool(tmp_path, embeddings):
    from pathlib import Path

    from mtl_graph.memory.pool.pool import MemoryPool

    examples = EXAMPLES
    script = json.loads((examples / "primes" / "demo_script.json").read_text())
    script["answers"]["ReasoningBankDraft"] = {"items": [{"title": ls.RERUN.title,
                                                          "description": ls.RERUN.description,
                                                          "content": ls.RERUN.content}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    start = tmp_path / "start"
    pool = MemoryPool.open(start, embeddings)
    pool.add_many(ls.foreign_lessons())
    pool.close()
    before = sorted(p.name for p in start.rglob("*"))
    argv = ["--suite", f"dir:{examples}", "--model", f"scripted:{tmp_path / 'script.json'}", "--pool", str(start),
            "--condition", "reasoningbank", "--condition", "mtl", "--sandbox", "local", "--out", str(tmp_path / "o")]
    result = eval_baselines(*argv)
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "o" / "baselines.json").read_text())
    assert len(data["tasks"]) == 3 and set(data["summary"]) == {"reasoningbank", "mtl"}
    rb, mtl = data["summary"]["reasoningbank"], data["summary"]["mtl"]
    assert rb["pool_size_end"] == 1 + 3 and rb["extra_per_stage_per_run"]["distill"]["calls"] == 1
    assert "plan" not in rb["extra_per_stage_per_run"] and mtl["extra_per_stage_per_run"]["plan"]["calls"] == 1
    assert 0 < mtl["pass@1"] < 1  # the one script solves one of the three tasks
    assert sorted(p.name for p in start.rglob("*")) == before  # the starting pool is copied, never written
    assert "| reasoningbank |" in result.stdout


def test_a_suite_needs_a_model_and_a_usable_suite(tmp_path):
    for argv, line in ((["--suite", "dir:tasks"], "--suite needs --model (provider:model or "
                                                            "scripted:FILE.json)"),
                       (["--suite", "nosuch:x", "--model", "scripted:no-such-script.json"],
                        None),
                       (["--suite", "dir:tasks", "--model", "nosuchprovider:m"], None)):
        result = eval_baselines(*argv, "--out", tmp_path / "bad")
        assert result.exit_code == 2, result.output
        err = result.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and (line is None or err == [f"error: {line}"])
        assert not (tmp_path / "bad").exists()


def test_a_run_that_errors_is_counted_beside_the_pass_rate_not_as_a_failure(tmp_path, embeddings):
    from mtl_graph.memory.pool.pool import MemoryPool

    spec = next(s for s in ls.make_tasks(12, prefix="err") if s.second_fix is None)  # passes however it goes
    broken = spec.task.model_copy(update={"id": "err-broken", "setup": "exit 3"})  # its setup fails: no fair try
    made = iter(range(10))
    out = bl.run_baselines([broken, spec.task], lambda: MemoryPool.open(tmp_path / f"p{next(made)}", embeddings),
                           lambda task: ls.agent_for(spec), ["reasoningbank"], sandbox="local")
    s = out.summary()["reasoningbank"]
    assert [r.status for r in out.attempts["reasoningbank"][0].runs] == ["error", "pass"]
    assert s["errors"] == 1 and s["pass@1"] == 1.0 and s["pool_size_end"] == 1  # the errored run wrote nothing
    assert bl.markdown(out).splitlines()[4].endswith("| 1 |")


def test_mtl_with_memory_as_a_tool_counts_the_agents_searches_as_shown_and_as_cost(tmp_path, embeddings):
    """`mtl+tool` (not in the default set): nothing injected, the agent's searches are what it is shown; each call
    is counted beside the pass rate."""
    from langchain_core.messages import AIMessage

    from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
    from mtl_graph.memory.pool.pool import MemoryPool

    specs = _specs()[:2]
    by_id = {s.task.id: s for s in specs}

    def searching_agent(task):
        scripted = ls.agent_for(by_id[task.id])
        search = AIMessage("", tool_calls=[{"name": "search_memories", "args": {"query": task.instruction[:200]},
                                            "id": f"call_search_{task.id}", "type": "tool_call"}])
        return ScriptedChatModel(responses=[search, *scripted.responses], plan=scripted.plan,
                                 answers=scripted.answers)

    assert "mtl+tool" not in bl.DEFAULT_CONDITIONS and "mtl+tool" in bl.CONDITIONS

    def pool_factory():
        pool = ls.starting_pool(MemoryPool.open(tmp_path / f"pool-{len(list(tmp_path.iterdir()))}", embeddings),
                                "positive")
        pool.add_many(ls.foreign_lessons())
        return pool

    out = bl.run_baselines([s.task for s in specs], pool_factory, searching_agent, ["mtl+tool", "mtl"],
                           sandbox="local", run_log=tmp_path / "runs.jsonl")
    summary = out.summary()
    tool, inject = summary["mtl+tool"], summary["mtl"]
    assert tool["memory_tool_calls_per_run"] == 1 and inject["memory_tool_calls_per_run"] == 0
    assert tool["retrieved_per_run"] > 0  # what its searches showed
    assert "plan" not in tool["extra_per_stage_per_run"]  # nothing injected: no planned query
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert all(r["retrieved"] == [] and r["retrieval"]["searches"] for r in runs[:2])
