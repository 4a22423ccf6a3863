"""`mtl run` and `mtl demo` through the CLI (scripted model, real sandbox, real pool)."""

import json

from typer.testing import CliRunner

from mtl_graph.cli import app
from helpers.paths import EXAMPLES

runner = CliRunner()


def test_demo_runs_offline_and_transfers_across_domains(tmp_path):
    result = runner.invoke(app, ["demo", "--pool", str(tmp_path / "pool")])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "scripted model" in out and out.count("PASS (by tests)") == 3
    assert "from strings (task examples/slugify)" in out  # the math task retrieved the strings memory
    listed = runner.invoke(app, ["memories", "list", "--json", "--pool", str(tmp_path / "pool")])
    assert sorted(m["sources"][0]["domain"] for m in json.loads(listed.output)) == ["data", "math", "strings"]


def test_run_with_a_scripted_model_and_json_output(tmp_path):
    script = EXAMPLES / "slugify" / "demo_script.json"
    result = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{script}",
                                 "--memory", "trajectory", "--pool", str(tmp_path / "pool"), "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.output)
    assert state["verdict"]["status"] == "pass" and len(state["new_memory_ids"]) == 1 and state["error"] is None
    from mtl_graph.pipeline.state import OUTPUT_FIELDS  # everything a run hands back but its transcript

    assert set(state) == set(OUTPUT_FIELDS) - {"trajectory"} and state["outcome"] == "success"


def test_run_json_has_the_judges_verdict_with_judge_also(tmp_path):
    script = EXAMPLES / "primes" / "demo_script.json"  # carries a judge answer
    result = runner.invoke(app, ["run", str(EXAMPLES / "primes"), "--model", f"scripted:{script}", "--judge-also",
                                 "--pool", str(tmp_path / "pool"), "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.output)
    assert state["verdict"]["source"] == "tests" and state["judge_verdict"]["source"] == "judge"


def test_run_bad_input(tmp_path):
    no_model = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--pool", str(tmp_path / "p")])
    assert no_model.exit_code == 1 and "no chat model configured" in no_model.output and "mtl demo" in no_model.output
    missing = runner.invoke(app, ["run", str(tmp_path / "nope"), "--model", "scripted:x.json"])
    assert missing.exit_code == 1 and "task directory not found" in missing.output
    bad_memory = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", "scripted:x.json", "--memory", "poem"])
    assert bad_memory.exit_code == 1 and "invalid --memory 'poem'" in bad_memory.output
    bad_script = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{tmp_path}/none.json",
                                     "--pool", str(tmp_path / "p"), "--memory", "none"])
    assert bad_script.exit_code == 1 and "cannot load scripted model" in bad_script.output
