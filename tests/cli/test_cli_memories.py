"""`mtl memories ...` through typer's test runner, on a real embedded pool."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.workflow import WorkflowMemory

runner = CliRunner()

MEMORIES = [
    InsightMemory(title="Verify with the test suite", description="Run the tests after each edit.",
                  content="Run pytest -q before submitting.", outcome="success",
                  sources=[Provenance(domain="humaneval", source_task_id="h1")]),
    InsightMemory(title="Respect the output format", description="Print exactly what the task asks.",
                  content="Compare your output byte for byte.", outcome="failure",
                  sources=[Provenance(domain="exercism", source_task_id="e1")]),
    WorkflowMemory(goal="Fix a failing unit test", actions=["run the test", "read the traceback", "edit", "rerun"],
                   sources=[Provenance(domain="exercism", source_task_id="e2")]),
]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_add_search_list_show_stats_export_delete(tmp_path):
    pool = tmp_path / "pool"
    src = tmp_path / "m.jsonl"
    src.write_text("".join(m.model_dump_json() + "\n" for m in MEMORIES))
    result = invoke("memories", "add", src, "--pool", pool)
    assert result.exit_code == 0, result.output
    assert "3 added" in result.output

    result = invoke("memories", "search", "how do I check my change works", "--json", "--k", "2", "--pool", pool)
    hits = json.loads(result.output)
    assert len(hits) == 2 and hits[0]["memory"]["title"] == "Verify with the test suite"

    result = invoke("memories", "search", "tests", "--exclude-domain", "humaneval", "--type", "insight",
                    "--json", "--pool", pool)
    assert [h["memory"]["title"] for h in json.loads(result.output)] == ["Respect the output format"]

    result = invoke("memories", "search", "fix a failing test", "--pool", pool)
    assert result.exit_code == 0 and "workflow" in result.output and "found by" in result.output

    listed = json.loads(invoke("memories", "list", "--json", "--type", "workflow", "--pool", pool).output)
    assert [m["goal"] for m in listed] == ["Fix a failing unit test"]

    shown = invoke("memories", "show", MEMORIES[0].id[:8], "--pool", pool)
    assert shown.exit_code == 0 and "source: task=h1 domain=humaneval" in shown.output

    stats = json.loads(invoke("memories", "stats", "--json", "--pool", pool).output)
    assert stats["total"] == 3 and stats["type"] == {"insight": 2, "workflow": 1}

    out = tmp_path / "out.jsonl"
    assert invoke("memories", "export", out, "--pool", pool).exit_code == 0
    assert len(out.read_text().splitlines()) == 3

    result = invoke("memories", "delete", MEMORIES[2].id, "--pool", pool)
    assert result.exit_code == 0 and invoke("memories", "show", MEMORIES[2].id, "--pool", pool).exit_code == 1

    copy = tmp_path / "copy"
    assert "3 added" in invoke("memories", "import", out, "--pool", copy).output


def test_bad_input_is_one_clear_line(tmp_path):
    pool = tmp_path / "pool"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(MEMORIES[0].model_dump_json() + "\n{oops\n" + json.dumps({"type": "haiku"}) + "\n")
    result = invoke("memories", "add", bad, "--pool", pool)
    assert result.exit_code == 1
    assert "1 added" in result.output
    assert f"{bad}:2: malformed JSON" in result.output and f"{bad}:3: invalid memory" in result.output

    missing = invoke("memories", "add", tmp_path / "nope.jsonl", "--pool", pool)
    assert missing.exit_code == 1 and "no such file" in missing.output
    unknown_type = invoke("memories", "search", "x", "--type", "poem", "--pool", pool)
    assert unknown_type.exit_code == 1 and "unknown memory type 'poem'" in unknown_type.output
    assert invoke("memories", "show", "ffffffff", "--pool", pool).exit_code == 1
    server = invoke("memories", "stats", "--pool", "http://127.0.0.1:9")
    assert server.exit_code == 1 and "cannot reach the Qdrant server" in server.output


HEAVY = ("langgraph", "langchain", "qdrant_client", "qdrant_edge", "fastembed", "onnxruntime", "pydantic_settings",
         "detect_secrets", "numpy")
"""What `mtl --help` and a group's help must not load (`langchain`: langchain_core and every langchain_* too)."""


@pytest.mark.parametrize("argv", [["--help"], [], ["pool", "--help"], ["eval", "--help"], ["memories", "--help"],
                                  ["pool", "snapshot", "--help"]], ids=lambda argv: " ".join(["mtl", *argv]))
def test_help_is_fast_and_imports_nothing_heavy(argv):
    # Its own process, so what earlier tests imported does not count. `mtl eval --help` builds the run flags from
    # the run settings (which name AgentConfig's fields): that too must not pull in LangChain or the settings.
    code = (f"import sys\nsys.argv = ['mtl', *{argv!r}]\nfrom mtl_graph.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"heavy = sorted({{m for m in sys.modules if m.split('.')[0].startswith({HEAVY!r})}})\nprint(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Usage:" in out
    assert out.strip().splitlines()[-1] == "[]"


def test_mtl_help_builds_no_command():
    # The list of commands comes from their docstrings: no command's options are built, so neither the run settings
    # (mtl run's flags) nor the importers (mtl ingest --format's help) are imported.
    code = ("import sys\nsys.argv = ['mtl', '--help']\nfrom mtl_graph.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('mtl_graph.config.names', 'mtl_graph.importers', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_a_corrupt_pool_is_one_clear_line(tmp_path):
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.memory.engine.storage import StoredPoint

    location = tmp_path / "pool"
    with MemoryPool.open(location) as pool:
        pool.store.upsert([StoredPoint("00000000-0000-0000-0000-000000000002", [0.1] * pool.dim, ([1], [1.0]),
                                       {"memory": "garbage", "type": "insight"})])
    result = invoke("memories", "list", "--pool", location)
    assert result.exit_code == 1 and "not a valid memory" in result.output
    assert "Traceback" not in result.output
