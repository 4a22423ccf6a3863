"""Importers: the four formats from realistic fixtures, detection, directories, and every bad-input path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mtl_graph.importers import (
    FORMATS,
    NotARunError,
    TrajectoryImportError,
    detect_format,
    exit_code_of,
    import_file,
    load_file,
    load_many,
    load_trajectories,
    render_call,
    task_text,
)
from mtl_graph.core.trajectory import Trajectory, VerdictStatus
from mtl_graph.core.task import TaskRef
from helpers.paths import LOGS


def test_mini_swe_agent_v1() -> None:
    [t] = load_file(LOGS / "mini_swe_agent" / "pallets__flask-4992.traj.json")
    assert t.source_format == "mini-swe-agent"
    assert t.task.id == "pallets__flask-4992"
    assert t.task.instruction.startswith("Add a file mode parameter to flask.Config.from_file()")
    assert "<instructions>" not in t.task.instruction
    assert t.model == "openai/gpt-5-mini" and t.exit_status == "Submitted"
    assert t.submission and t.submission.startswith("diff --git a/src/flask/config.py")
    # the reply with two bash blocks drew a format error and is not a step
    assert len(t.steps) == 5
    assert t.steps[0].action.startswith("grep -n \"def from_file\"")
    assert t.steps[0].reasoning == "THOUGHT: Let me find the Config class and its from_file method."
    assert t.steps[0].exit_code == 0 and "232:    def from_file(" in t.steps[0].observation
    assert "<returncode>" not in t.steps[0].observation
    assert "25 passed" in t.steps[3].observation
    assert t.steps[-1].action.startswith("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT") and t.steps[-1].observation == ""
    assert t.verdict is None


def test_mini_swe_agent_v2_tool_calls() -> None:
    [t] = load_file(LOGS / "mini_swe_agent" / "astropy__astropy-12907.traj.json")
    assert t.task.id == "astropy__astropy-12907" and t.exit_status == "LimitsExceeded"
    assert [s.action for s in t.steps] == ["sed -n 200,260p astropy/modeling/separable.py", "python repro.py"]
    assert t.steps[1].exit_code == 1 and "No such file" in t.steps[1].observation
    assert t.tokens.input == 4500 and t.tokens.output == 95
    assert t.submission is None and t.model == "anthropic/claude-sonnet-4-5"


def test_swe_agent_traj() -> None:
    [t] = load_file(LOGS / "swe_agent" / "django__django-11099.traj")
    assert t.source_format == "swe-agent"
    assert t.task.id == "django__django-11099"
    assert t.task.instruction.startswith("UsernameValidator allows trailing newline")
    assert t.model == "gpt-4o-2024-08-06" and t.exit_status == "submitted"
    assert len(t.steps) == 6 and t.steps[0].action == "find_file validators.py django/contrib/auth"
    assert t.steps[2].action.startswith("edit 11:11") and t.steps[4].duration_s == 4.9
    assert t.steps[0].reasoning == "I'll start by locating the validators."
    assert t.tokens.input == 41213 and t.tokens.output == 812
    assert "\\A[\\w.@+-]+\\Z" in (t.submission or "")


def test_swe_agent_without_replay_config_uses_history(tmp_path: Path) -> None:
    data = json.loads((LOGS / "swe_agent" / "django__django-11099.traj").read_text())
    del data["replay_config"]
    path = tmp_path / "django__django-11099.traj"
    path.write_text(json.dumps(data))
    [t] = load_file(path)
    assert t.task.id == "django__django-11099"
    assert t.task.instruction.startswith("UsernameValidator allows trailing newline")
    assert "INSTRUCTIONS" not in t.task.instruction


def test_langgraph_thread_values() -> None:
    [t] = load_file(LOGS / "langchain" / "thread_humaneval_3.json")
    assert t.source_format == "langchain"
    assert t.task.id == "HumanEval/3" and t.task.domain == "humaneval"
    assert "def below_zero" in t.task.instruction
    assert [s.tool for s in t.steps] == ["bash", "write_file", "bash"]
    assert t.steps[0].action == "cat solution.py" and t.steps[0].exit_code == 0
    assert t.steps[1].action.startswith('write_file({"content":') and t.steps[1].args["path"] == "solution.py"
    assert t.steps[2].observation.endswith("Test passed.")
    assert t.submission == "Implemented below_zero with a running balance; both doctests pass."
    assert t.model == "gpt-4o-mini-2024-07-18"
    assert t.tokens.input == 812 + 1020 + 1200 + 1300


def test_messages_to_dict_list_and_domain_default() -> None:
    [t] = load_file(LOGS / "langchain" / "report_csv_messages.json", domain="scripts")
    assert t.task.id == "report_csv_messages" and t.task.domain == "scripts"
    assert t.steps[0].exit_code == 1 and "ValueError" in t.steps[0].observation
    assert t.steps[1].reasoning == "Skip rows that are empty."


def test_lc_serialized_messages(tmp_path: Path) -> None:
    from langchain_core.load import dumpd
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    msgs = [HumanMessage("print hello"), AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "echo hello"}, "id": "1"}]),
            ToolMessage("hello", tool_call_id="1")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"messages": [dumpd(m) for m in msgs]}))
    [t] = load_file(path)
    assert t.steps[0].action == "echo hello" and t.steps[0].observation == "hello"


def test_runlog_strips_extra_keys_and_skips_other_records() -> None:
    runs = load_file(LOGS / "runlog" / "runs.jsonl")
    assert [r.task.id for r in runs] == ["fizzbuzz-cli", "json-config-merge"]
    assert runs[0].verdict and runs[0].verdict.status == VerdictStatus.PASS and runs[0].verdict.source == "tests"
    assert runs[1].verdict and runs[1].verdict.status == VerdictStatus.FAIL
    assert runs[0].source_format == "mtl-runlog" and runs[0].steps[2].duration_s == 0.05


def test_trajectory_json_round_trip_through_runlog(tmp_path: Path) -> None:
    [t] = load_file(LOGS / "swe_agent" / "django__django-11099.traj")
    path = tmp_path / "log.jsonl"
    path.write_text(t.model_dump_json() + "\n")
    [back] = load_file(path)
    assert back == t
    assert Trajectory.model_validate_json(t.model_dump_json()) == t
    assert back.content_hash() == t.content_hash()


def test_directory_imports_every_file() -> None:
    loaded, errors = load_many([LOGS], domain="mixed")
    assert not [e for e in errors if "/bad/" not in e.path and not isinstance(e, NotARunError)]
    # this tree holds the trajectory-file formats; the session logs of Claude Code, Codex, OpenHands and Aider have
    # their own (tests/fixtures/agent_logs), and an importer added later brings its own test and fixture
    here = {"mtl-runlog", "swe-agent", "mini-swe-agent", "langchain"}
    assert {item.trajectory.source_format for item in loaded} == here and here <= set(FORMATS)
    # a bad JSONL line costs only itself: bad_line.jsonl's good first line is imported
    assert [i.trajectory.task.id for i in loaded if i.path.name == "bad_line.jsonl"] == ["fizzbuzz-cli"]
    per_file = {f.path.name: len(f.runs) for f in map(import_file, {i.path for i in loaded})}
    assert len(loaded) == sum(per_file.values()) == 22 and per_file["runs_with_bad_lines.jsonl"] == 6
    # the demonstration and unknown.json (no known format, found in a directory) are skipped, not failed
    assert len(errors) == 10 and sum(isinstance(e, NotARunError) for e in errors) == 2


def test_strict_directory_load_raises_on_bad_file() -> None:
    with pytest.raises(TrajectoryImportError):
        load_trajectories(LOGS / "bad")
    assert len(load_trajectories(LOGS / "swe_agent")) == 1


@pytest.mark.parametrize(
    ("name", "message", "line"),
    [
        ("empty.json", "empty file", None),
        ("malformed.traj.json", "malformed JSON", 2),
        ("unknown.json", "unknown log format", None),
        ("binary.traj", "binary file", None),
        ("latin1.json", "not UTF-8", 1),
        ("bad_line.jsonl", "not a run record: steps", 2),
    ],
)
def test_bad_files_name_the_file(name: str, message: str, line: int | None) -> None:
    path = LOGS / "bad" / name
    with pytest.raises(TrajectoryImportError) as info:
        load_file(path)
    assert str(path) in str(info.value) and message in str(info.value)
    assert info.value.line == line


def test_huge_file_and_missing_file(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text("x" * 2000)
    with pytest.raises(TrajectoryImportError, match="too large"):
        load_file(big, max_bytes=1000)
    with pytest.raises(TrajectoryImportError, match="no such file"):
        load_file(tmp_path / "nope.json")


def test_whitespace_only_and_no_runs(tmp_path: Path) -> None:
    blank = tmp_path / "blank.json"
    blank.write_text("\n\n  \n")
    with pytest.raises(TrajectoryImportError, match="empty file"):
        load_file(blank)
    only_events = tmp_path / "events.jsonl"
    only_events.write_text(json.dumps({"record": "session", "task": {"id": "x"}}) + "\n")
    with pytest.raises(TrajectoryImportError, match="no runs"):
        load_file(only_events)


def test_forced_format_mismatch_and_unknown_format_name() -> None:
    with pytest.raises(TrajectoryImportError, match="not a swe-agent log"):
        load_file(LOGS / "langchain" / "thread_humaneval_3.json", format="swe-agent")
    with pytest.raises(TrajectoryImportError, match="unknown format 'no-such-agent'"):
        load_file(LOGS / "langchain" / "thread_humaneval_3.json", format="no-such-agent")
    with pytest.raises(TrajectoryImportError, match="JSON object"):
        load_file(LOGS / "langchain" / "report_csv_messages.json", format="mini-swe-agent")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"messages": [{"type": "ai", "content": "hi"}]}, "no human message"),
        ({"messages": [{"type": "alien", "content": "hi"}]}, "message 0 is not a chat message"),
        ({"trajectory": [], "info": {}}, "no problem statement"),
        ({"trajectory": ["x"], "replay_config": {"problem_statement": {"text": "t"}}}, "trajectory[0] is not an object"),
        ({"messages": [{"role": "system", "content": "s"}], "info": {}}, "no user message"),
        ({"messages": [{"role": "user", "content": "x"}], "info": {"submission": 5}}, "invalid mini-swe-agent log"),
        ({"trajectory": [{"action": "ls", "execution_time": "slow"}], "replay_config": {"problem_statement": {"text": "t"}}},
         "trajectory[0].execution_time is not a number of seconds ('slow')"),
    ],
)
def test_structurally_wrong_logs(tmp_path: Path, payload: dict, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(TrajectoryImportError, match=re.escape(message)):
        load_file(path)


def test_detection_and_helpers() -> None:
    assert detect_format("not json at all") is None
    assert detect_format('[{"role": "user", "content": "x"}]') == "langchain"
    assert detect_format('{"task": {"id": "a"}, "steps": []}') == "mtl-runlog"
    assert exit_code_of("<returncode>2</returncode>\n<output>x</output>") == 2
    assert exit_code_of("Exit code: -9\nkilled") == -9
    assert exit_code_of("all good") is None
    assert render_call("bash", {"command": "ls"}) == "ls"
    assert render_call("str_replace", {"path": "a", "old": "x"}) == 'str_replace({"old": "x", "path": "a"})'
    assert task_text("<issue>\nfix it\n</issue> rest") == "fix it"
    assert task_text("plain text") == "plain text"


def test_given_labels_are_read(tmp_path: Path) -> None:
    data = json.loads((LOGS / "mini_swe_agent" / "pallets__flask-4992.traj.json").read_text())
    data["info"]["resolved"] = True
    path = tmp_path / "r.traj.json"
    path.write_text(json.dumps(data))
    [t] = load_file(path)
    assert t.verdict and t.verdict.status == VerdictStatus.PASS and t.verdict.source == "given"


def test_trajectory_from_messages_objects_and_dicts() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from mtl_graph.importers import trajectory_from_messages

    msgs = [SystemMessage("memories here"), HumanMessage("Fix the failing test."),
            AIMessage("Look first.", tool_calls=[{"name": "bash", "args": {"command": "pytest -q"}, "id": "1"}],
                      usage_metadata={"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}),
            ToolMessage("exit code: 1\n1 failed", tool_call_id="1"), AIMessage("Cannot fix it.")]
    task = TaskRef(id="t-9", domain="d", instruction="Fix the failing test.")
    t = trajectory_from_messages(msgs, task=task)
    assert t.task == task and t.steps[0].exit_code == 1 and t.steps[0].reasoning == "Look first."
    assert t.submission == "Cannot fix it." and t.tokens.input == 10 and t.source_format == "langchain"
    untasked = trajectory_from_messages([m.model_dump() for m in msgs])
    assert untasked.task.instruction == "Fix the failing test." and untasked.steps == t.steps
    with pytest.raises(TrajectoryImportError, match="no human message"):
        trajectory_from_messages(msgs[2:])
