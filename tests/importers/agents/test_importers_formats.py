"""Importers against the shapes agents write today (fixtures of each), and every per-record bad-input path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtl_graph.importers import (NotARunError, TrajectoryImportError, detect_format, import_file,
                                            load_file, load_many, parse_observation, task_text)
from helpers.paths import LOGS

SHAPES = LOGS / "shapes"
MINI = SHAPES / "mini_swe_agent"
TAIL = "2 failed, 400 passed in 3.21s"


def test_mini_v2_fences_keep_the_whole_raw_output() -> None:
    [t] = load_file(MINI / "textkit__textkit-57.v2_fences.traj.json")
    assert t.source_format == "mini-swe-agent" and t.task.id == "textkit__textkit-57"
    assert t.task.instruction.startswith("`slugify()` keeps trailing dashes") and "Recommended Workflow" not in t.task.instruction
    # the format-error turn ran nothing; the submit command is a step whose answer is the exit message's patch
    assert [s.action.split()[0] for s in t.steps] == ["grep", "python", "python", "sed", "echo"]
    long = t.steps[1]
    assert long.exit_code == 1 and TAIL in long.observation and "test_slug_case_000" in long.observation
    assert "characters cut" not in long.observation  # raw_output is the untruncated output
    assert t.steps[2].exit_code == -1 and t.steps[2].observation.startswith("[exception] Command timed out")
    assert t.exit_status == "Submitted" and t.submission and t.submission.startswith("diff --git")
    assert t.tokens.input == 1500 + 1900 + 2300 + 2700 + 3400 and t.model == "openai/gpt-5-mini"


def test_mini_v2_tags_keep_head_tail_and_the_cut() -> None:
    [t] = load_file(MINI / "textkit__textkit-57.v2_tags.traj.json")
    assert len(t.steps) == 5 and t.steps[0].action == 'grep -rn "def slugify" src/'
    obs = t.steps[1].observation
    assert obs.startswith("[warning] The output of your last command was too long.")
    assert "test_slug_case_000 PASSED" in obs and obs.rstrip().endswith(TAIL + " ==========")
    elided = len(json.loads((MINI / "textkit__textkit-57.v2_fences.traj.json").read_text())
                 ["messages"][5]["extra"]["raw_output"]) - 10000
    assert f"[... {elided} characters cut ...]" in obs
    for tag in ("<output_head>", "<output_tail>", "<elided_chars>", "<returncode>", "<warning>"):
        assert tag not in obs


def test_mini_v2_tool_calls_with_json_observations() -> None:
    [t] = load_file(MINI / "textkit__textkit-57.v2_toolcalls.traj.json")
    assert t.task.instruction.startswith("`slugify()`") and "<instructions>" not in t.task.instruction
    assert [s.exit_code for s in t.steps] == [0, 1, 0] and TAIL in t.steps[1].observation
    assert t.steps[0].reasoning == "Find where slugify is defined." and t.exit_status == "LimitsExceeded"
    assert t.submission is None


def test_mini_tool_call_json_observation_without_raw_output() -> None:
    data = json.loads((MINI / "textkit__textkit-57.v2_toolcalls.traj.json").read_text())
    msg = data["messages"][5]
    del msg["extra"]
    text, code, rendered = parse_observation(msg)
    assert rendered and code == 1 and text.startswith("[warning] Output too long.")
    assert TAIL in text and "[... " in text and "characters cut ...]" in text


def test_bare_message_list_is_mini_not_langchain() -> None:
    path = MINI / "bare_messages_v1.json"
    assert detect_format(path.read_text()) == "mini-swe-agent"
    [t] = load_file(path)
    assert t.source_format == "mini-swe-agent" and t.task.id == "bare_messages_v1"
    # the reply with two ```bash blocks drew a format error: no step; the last user message is the submission
    assert [s.action for s in t.steps][-1] == "echo MINI_SWE_AGENT_FINAL_OUTPUT && git diff"
    assert len(t.steps) == 4 and t.steps[-1].observation == ""
    assert t.submission and t.submission.startswith("diff --git a/src/textkit/slug.py")
    assert TAIL in t.steps[1].observation and "characters cut" in t.steps[1].observation


def test_plain_openai_message_list_is_still_langchain() -> None:
    text = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert detect_format(text) == "langchain"


@pytest.mark.parametrize("fence", ["```mswea_bash_command\nls -la\n```", "<mswea_bash_command>ls -la</mswea_bash_command>",
                                   "```bash\nls -la\n```", "<bash_code>ls -la</bash_code>"])
def test_every_mini_action_syntax(tmp_path: Path, fence: str) -> None:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "Please solve this issue: list files\n\n"
             "You can execute bash commands and edit files to implement the necessary changes."},
            {"role": "assistant", "content": f"THOUGHT: look.\n\n{fence}"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.txt\n</output>"}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(msgs))
    [t] = load_file(path)
    assert t.task.instruction == "list files"
    assert [(s.action, s.observation, s.exit_code, s.reasoning) for s in t.steps] == [("ls -la", "a.txt", 0, "THOUGHT: look.")]


def test_swe_agent_ctf_task_is_the_challenge_not_the_prompt() -> None:
    path = SHAPES / "swe_agent" / "ctf" / "lockbox.traj"
    [t] = load_file(path)
    prompt = json.loads(path.read_text())["history"][1]["content"]
    assert len(prompt) > 2000 and len(t.task.instruction) < 400
    assert t.task.instruction.startswith('The CTF challenge is a reverse engineering problem named "Lockbox"')
    assert "We lost the PIN" in t.task.instruction and "INSTRUCTIONS" not in t.task.instruction
    assert t.submission == "flag{p1n_1n_pl41n_s1ght}" and len(t.steps) == 4 and t.tokens.input == 18342


def test_swe_agent_demonstration_is_skipped_as_not_a_run() -> None:
    path = SHAPES / "not_runs" / "version_twice_demo.traj"
    result = import_file(path)
    assert not result.runs and not result.errors
    assert isinstance(result.skipped, NotARunError) and "not a run" in str(result.skipped)
    with pytest.raises(NotARunError):
        load_file(path)


def test_task_text_of_each_template_family() -> None:
    assert task_text("<uploaded_files>\n/repo\n</uploaded_files>\nConsider the following PR description:\n\n"
                     "<pr_description>\nFix X.\n</pr_description>\n\nCan you help me meet the <pr_description>?") == "Fix X."
    assert task_text("We're currently attempting to solve the following problem:\nISSUE:\nAdd Y.\n\nINSTRUCTIONS:\nGo.") == "Add Y."
    assert task_text("Please solve this issue: Rename Z.\n\nYou can execute bash commands and edit files.") == "Rename Z."


def test_langchain_lc_state_dump() -> None:
    [t] = load_file(SHAPES / "langchain" / "inventory_json_lc_state.json")
    assert t.task.id == "inventory-json-flag" and t.task.domain == "cli-tools"
    assert [s.tool for s in t.steps] == ["bash", "str_replace", "bash"] and t.model == "qwen2.5-coder-7b"
    assert t.tokens.input == 640 + 720 + 800 + 850 and t.submission.startswith("The --json flag")


def test_malformed_tool_call_arguments_keep_the_failed_step() -> None:
    [t] = load_file(SHAPES / "langchain" / "lint_openai_messages.json")
    assert len(t.steps) == 3
    bad = t.steps[1]
    assert bad.action == "bash({\"command\": \"sed -i '3d' tools/report.py)" and "not valid JSON" in bad.observation
    assert t.steps[2].exit_code == 0


def test_mini_malformed_tool_call_arguments(tmp_path: Path) -> None:
    data = json.loads((LOGS / "mini_swe_agent" / "astropy__astropy-12907.traj.json").read_text())
    data["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"command": "sed -n 1p x.py'
    path = tmp_path / "a.traj.json"
    path.write_text(json.dumps(data))
    [t] = load_file(path)
    assert t.steps[0].action == 'bash({"command": "sed -n 1p x.py)' and t.steps[1].action == "python repro.py"


def test_run_log_bad_lines_cost_only_themselves() -> None:
    path = SHAPES / "bad" / "runs_with_bad_lines.jsonl"
    result = import_file(path)
    assert [r.task.id for r in result.runs] == [f"kata-{i}" for i in range(1, 7)]
    assert [(e.line, e.reason.split(" (")[0]) for e in result.errors] == [
        (4, "malformed JSON"), (7, "not UTF-8 text"), (10, "the line is cut short")]
    assert all("\n" not in str(e) for e in result.errors)
    # U+2028 inside a string is not a line break
    assert "\u2028" in result.runs[0].task.instruction and result.runs[0].steps[0].observation == "ok\u2028done"
    with pytest.raises(TrajectoryImportError) as info:
        load_file(path)
    assert info.value.line == 4


@pytest.mark.parametrize(
    ("name", "payload", "message"),
    [
        ("tokens.json", {"info": {}, "messages": [{"role": "user", "content": "t"}, {"role": "assistant",
         "content": "```bash\nls\n```", "extra": {"response": {"usage": {"prompt_tokens": "lots"}}}}]},
         "messages[1].usage.prompt_tokens is not a token count ('lots')"),
        ("lc_tokens.json", {"messages": [{"type": "human", "content": "t"}, {"type": "ai", "content": "x",
         "usage_metadata": {"input_tokens": 1.5, "output_tokens": 1, "total_tokens": 2}}]},
         "message 1 input_tokens is not a token count ('1.5')"),
        ("lc_dict_tokens.json", [{"type": "human", "data": {"content": "t"}}, {"type": "ai", "data": {"content": "x",
         "usage_metadata": {"input_tokens": "lots", "output_tokens": 1, "total_tokens": 2}}}],
         "message 1 is not a chat message (usage_metadata.input_tokens: Input should be a valid integer"),
        ("swe_tokens.traj", {"trajectory": [], "info": {"model_stats": {"tokens_sent": [1]}},
         "replay_config": {"problem_statement": {"text": "t"}}}, "info.model_stats.tokens_sent is not a token count"),
        ("pydantic.json", {"messages": [{"type": "human", "content": "t"}, {"type": "ai", "content": "x",
         "tool_calls": [{"name": "bash", "args": "ls", "id": "1"}]}]}, "message 1 is not a chat message"),
    ],
)
def test_bad_records_give_one_line(tmp_path: Path, name: str, payload: object, message: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(payload))
    result = import_file(path)
    assert not result.runs and len(result.errors) == 1
    text = str(result.errors[0])
    assert message in text and "\n" not in text and text.startswith(f"{path}: ") and "Error" not in text


def test_deeply_nested_json_is_one_error_not_a_crash(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    line = tmp_path / "deep.jsonl"
    good = (LOGS / "runlog" / "runs.jsonl").read_text().splitlines()[1]
    line.write_text(good + "\n" + '{"record": "run", "task": {"id": "x"}, "steps": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    [err] = import_file(deep).errors
    assert "nested too deeply" in str(err)
    result = import_file(line)
    assert len(result.runs) == 1 and result.errors[0].line == 2 and "nested too deeply" in result.errors[0].reason


def test_directory_argument_to_load_file_and_batch_never_raises(tmp_path: Path) -> None:
    result = import_file(tmp_path)
    assert "is a directory" in str(result.errors[0])
    (tmp_path / "junk.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "weird.json").write_text(json.dumps({"messages": [{"type": "human", "content": {"nested": 1}}]}))
    loaded, errors = load_many([tmp_path, SHAPES / "not_runs"])
    assert not loaded and len(errors) == 3
    assert sum(isinstance(e, NotARunError) for e in errors) == 1


def test_trajectory_memory_marks_how_much_of_a_long_observation_was_cut() -> None:
    from mtl_graph.distill.distillers import distill
    from mtl_graph.memory.base import MAX_LONG, MemoryType

    [t] = load_file(MINI / "textkit__textkit-57.v2_fences.traj.json")
    long = "\n".join(f"line {i}" for i in range(6000)) + "\n" + TAIL
    t.steps[1].observation = long
    [memory] = distill(t, [MemoryType.TRAJECTORY], None).memories
    kept = memory.steps[1].observation
    assert len(kept) <= MAX_LONG and kept.startswith("line 0\n") and kept.endswith(TAIL)
    cut = int(kept.split("[... ")[1].split(" characters cut")[0])
    assert len(kept) - len(f"\n[... {cut} characters cut ...]\n") + cut == len(long)


def test_run_log_has_no_size_limit_other_logs_do(tmp_path: Path) -> None:
    good = (LOGS / "runlog" / "runs.jsonl").read_text().splitlines()[1]
    log = tmp_path / "runs.jsonl"
    log.write_text((good + "\n") * 40)
    assert len(import_file(log, max_bytes=1000).runs) == 40  # streamed line by line, however long it grows
    big = tmp_path / "big.traj.json"
    big.write_text((MINI / "textkit__textkit-57.v2_tags.traj.json").read_text())
    assert "file too large" in str(import_file(big, max_bytes=1000).errors[0])
    fifo = tmp_path / "pipe.json"
    import os

    os.mkfifo(fifo)
    assert "not a regular file" in str(import_file(fifo).errors[0])


def test_langgraph_state_history_uses_the_newest_state(tmp_path: Path) -> None:
    state = json.loads((SHAPES / "langchain" / "inventory_json_lc_state.json").read_text())
    older = {"values": {"messages": state["messages"][:4]}, "next": ["tools"], "metadata": {"step": 2}}
    newest = {"values": {"messages": state["messages"]}, "next": [], "metadata": {"step": 8}}
    path = tmp_path / "history.json"
    path.write_text(json.dumps([newest, older]))
    [t] = load_file(path)
    assert len(t.steps) == 3 and t.submission and t.submission.startswith("The --json flag")


def test_a_file_forced_as_run_log_lists_a_bounded_number_of_bad_lines() -> None:
    from mtl_graph.importers.agents.runlog import MAX_LISTED_LINES

    path = MINI / "textkit__textkit-57.v2_fences.traj.json"
    n_lines = path.read_text().count("\n")
    result = import_file(path, format="mtl-runlog")
    assert not result.runs and len(result.errors) == MAX_LISTED_LINES + 1
    assert str(result.errors[-1]).endswith(f"{n_lines - MAX_LISTED_LINES} more bad lines after line {MAX_LISTED_LINES}")


def test_swe_agent_1x_traj_task_from_replay_config_or_history(tmp_path: Path) -> None:
    path = SHAPES / "swe_agent" / "csvkit__csvkit-1184.traj"
    [t] = load_file(path)
    assert t.task.id == "csvkit__csvkit-1184" and t.task.instruction.startswith("`csvkit.sniff()` treats")
    assert t.model == "claude-sonnet-4-20250514" and t.tokens.input == 52110 and len(t.steps) == 5
    assert t.steps[1].duration_s == 1.4 and "Row count: 0" in t.steps[3].observation
    data = json.loads(path.read_text())
    del data["replay_config"]
    bare = tmp_path / "csvkit__csvkit-1184.traj"
    bare.write_text(json.dumps(data))
    [u] = load_file(bare)
    # the demonstration's <pr_description> is skipped; the content-part list of the real prompt is read
    assert u.task.instruction == t.task.instruction and u.task.id == "csvkit__csvkit-1184"


def test_agent_output_directory_side_files(tmp_path: Path) -> None:
    """A mini-swe-agent / SWE-agent output directory: logs beside predictions, configs, patches and text logs."""
    run = tmp_path / "textkit__textkit-57"
    run.mkdir()
    (run / "textkit__textkit-57.traj.json").write_text((MINI / "textkit__textkit-57.v2_tags.traj.json").read_text())
    (run / "textkit__textkit-57.patch").write_text("diff --git a/x b/x\n")
    (run / "textkit__textkit-57.pred").write_text(json.dumps({"model_patch": "diff"}))
    (tmp_path / "minisweagent.log").write_text("INFO started\n")
    (tmp_path / "exit_statuses_1.yaml").write_text("Submitted: [textkit__textkit-57]\n")
    (tmp_path / "preds.json").write_text(json.dumps({"textkit__textkit-57": {"model_patch": "diff"}}))
    loaded, errors = load_many([tmp_path])
    assert [i.trajectory.task.id for i in loaded] == ["textkit__textkit-57"]
    [skipped] = errors
    assert isinstance(skipped, NotARunError) and skipped.path.endswith("preds.json") and "no known log format" in str(skipped)
    # named explicitly, a file of no known format is an error
    [err] = load_many([tmp_path / "preds.json"])[1]
    assert not isinstance(err, NotARunError) and "unknown log format" in str(err)


def test_lone_surrogates_become_replacement_characters(tmp_path: Path) -> None:
    record = json.loads((LOGS / "runlog" / "runs.jsonl").read_text().splitlines()[1])
    record["steps"][0]["observation"] = "read \ud800 then \ud83d\ude00"
    log = tmp_path / "runs.jsonl"
    log.write_text(json.dumps(record) + "\n")  # json.dumps escapes them: "\\ud800"
    [run] = load_file(log)
    assert run.steps[0].observation == "read \ufffd then \U0001F600"
    run.steps[0].observation.encode("utf-8")  # storable


def test_a_pool_kept_beside_the_logs_is_not_searched(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text((LOGS / "runlog" / "runs.jsonl").read_text())
    pool = tmp_path / "pool"
    (pool / "edge").mkdir(parents=True)
    (pool / "pool.json").write_text(json.dumps({"engine": "edge"}))
    (pool / "edge" / "edge_config.json").write_text("{}")
    (pool / "ingest-ledger.jsonl").write_text(json.dumps({"hash": "x", "format": "insight"}) + "\n")
    loaded, errors = load_many([tmp_path])
    assert len(loaded) == 2 and not errors
    assert load_many([pool]) == ([], [])
