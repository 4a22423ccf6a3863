"""--namespace on `mtl run`, `mtl ingest`, `mtl demo` and `mtl eval`, through the CLI (scripted model, real sandbox,
real pool): what one namespace runs or ingests lands in it alone, and a bad name is one error line, exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import ROOT

EXAMPLES = ROOT / "examples" / "tasks"
LOGS = ROOT / "tests" / "fixtures" / "logs"
runner = CliRunner()

B_MEMORY = InsightMemory(title="Slugify: lower-case and join words with hyphens", description="Applies to slugs.",
                         content="Strip punctuation, lower-case, join with '-'.", outcome="success",
                         sources=[Provenance(run_id="run-b", source_task_id="b-slug", domain="strings")])
"""Team B's memory, as close to the slugify task as can be: a run in team A must not retrieve it."""


def state_of(location: Path, namespace: str) -> list[tuple[str, str]]:
    """Every point of one namespace, whole (id and canonical payload)."""
    with MemoryPool.open(location, namespace=namespace) as pool:
        return sorted((p.id, json.dumps(p.payload, sort_keys=True)) for p in pool.store.scroll_points())


@pytest.fixture
def location(tmp_path, embeddings) -> Path:
    """A directory pool whose namespace team-b holds one memory."""
    with MemoryPool.open(tmp_path / "pool", embeddings, namespace="team-b") as pool:
        pool.add(B_MEMORY)
    return tmp_path / "pool"


def namespaces(location: Path) -> dict[str, int]:
    listed = runner.invoke(app, ["pool", "namespaces", "--json", "--pool", str(location)])
    assert listed.exit_code == 0, listed.output
    return {name: n for name, n in json.loads(listed.stdout).items() if n}


def test_run_in_one_namespace_leaves_another_untouched(location):
    before = state_of(location, "team-b")
    script = EXAMPLES / "slugify" / "demo_script.json"
    result = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{script}", "--memory",
                                 "insight", "--pool", str(location), "--namespace", "team-a", "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert state["retrieved_ids"] == [] and B_MEMORY.id not in result.stdout  # team-b's memory was not seen
    assert len(state["new_memory_ids"]) == 1
    assert state_of(location, "team-b") == before
    assert namespaces(location) == {"team-a": 1, "team-b": 1}
    with MemoryPool.open(location, namespace="team-a") as pool:
        assert [m.id for m in pool] == state["new_memory_ids"]


def test_ingest_in_one_namespace_leaves_another_untouched_and_keeps_its_own_ledger(location):
    before = state_of(location, "team-b")
    args = ["ingest", str(LOGS / "swe_agent"), "--formats", "trajectory", "--pool", str(location)]
    first = runner.invoke(app, [*args, "--namespace", "team-a"])
    assert first.exit_code == 0, first.output
    assert state_of(location, "team-b") == before and namespaces(location) == {"team-a": 1, "team-b": 1}
    # team-c ingests the same log: new to it (team-a's ledger is team-a's), and team-a's memory stays one
    again = runner.invoke(app, [*args, "--namespace", "team-c"])
    assert again.exit_code == 0, again.output
    assert namespaces(location) == {"team-a": 1, "team-b": 1, "team-c": 1}
    assert state_of(location, "team-b") == before
    assert sorted(p.name for p in location.glob("ingest-ledger*")) == ["ingest-ledger@team-a.jsonl",
                                                                       "ingest-ledger@team-c.jsonl"]
    resumed = runner.invoke(app, [*args, "--namespace", "team-a"])
    assert resumed.exit_code == 0 and namespaces(location)["team-a"] == 1  # its own ledger: already ingested


def test_demo_writes_into_its_namespace(location):
    before = state_of(location, "team-b")
    result = runner.invoke(app, ["demo", "--pool", str(location), "--namespace", "team-a"])
    assert result.exit_code == 0, result.output
    assert namespaces(location) == {"team-a": 3, "team-b": 1} and state_of(location, "team-b") == before


def test_eval_distils_into_its_namespace(location, tmp_path):
    before = state_of(location, "team-b")
    script = EXAMPLES / "slugify" / "demo_script.json"
    result = runner.invoke(app, ["eval", "--suites", f"dir:{EXAMPLES}", "--model", f"scripted:{script}", "--limit",
                                 "1", "--formats", "trajectory", "--out", str(tmp_path / "out"), "--pool",
                                 str(location), "--namespace", "team-a", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert namespaces(location) == {"team-a": 1, "team-b": 1} and state_of(location, "team-b") == before


BAD = {"dotdot": ("../team-a", "'/' is not allowed"), "space": ("team a", "' ' is not allowed"),
       "empty": ("", "it is empty"), "long": ("a" * 65, "65 characters"), "at": ("@team-a", "'@' is not allowed")}
COMMANDS = [
    ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{EXAMPLES / 'slugify' / 'demo_script.json'}"],
    ["ingest", str(LOGS / "swe_agent"), "--formats", "trajectory"],
    ["ingest", str(LOGS / "swe_agent"), "--formats", "trajectory", "--dry-run"],
    ["demo"],
    ["eval", "--suites", f"dir:{EXAMPLES}", "--model", f"scripted:{EXAMPLES / 'slugify' / 'demo_script.json'}",
     "--out", "OUT"],
]


CASES = [*zip(COMMANDS, BAD), *((COMMANDS[0], label) for label in list(BAD)[1:])]
"""Every command with one bad name, and every bad name on `mtl run`."""


@pytest.mark.parametrize("command,name,why", [
    pytest.param(c, *BAD[label], id="-".join([c[0], *(["dry"] if "--dry-run" in c else []), label]))
    for c, label in CASES])
def test_a_bad_namespace_is_one_error_line_and_nothing_runs(command, name, why, tmp_path):
    pool = tmp_path / "pool"
    args = [str(tmp_path / "out") if a == "OUT" else a for a in command]
    result = runner.invoke(app, [*args, "--pool", str(pool), "--namespace", name])
    assert result.exit_code == 1, result.output
    # run and demo take --namespace as a run setting (its error names the flag), the others as a pool option
    assert result.output.count("\n") == 1 and result.output.startswith(("error: invalid namespace",
                                                                        "error: invalid --namespace"))
    assert why in result.output
    assert not pool.exists() and not (tmp_path / "out").exists()  # refused before anything was opened or written


def test_mtl_namespace_still_applies_without_the_flag(location, monkeypatch):
    monkeypatch.setenv("MTL_NAMESPACE", "team-a")
    result = runner.invoke(app, ["ingest", str(LOGS / "swe_agent"), "--formats", "trajectory",
                                 "--pool", str(location)])
    assert result.exit_code == 0, result.output
    assert namespaces(location) == {"team-a": 1, "team-b": 1}
    assert (location / "ingest-ledger@team-a.jsonl").exists()
