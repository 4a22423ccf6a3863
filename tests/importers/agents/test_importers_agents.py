"""The session logs of the coding agents people run by hand: Claude Code, Codex CLI, OpenHands, Aider.

Each fixture (tests/fixtures/agent_logs) is our own content in the record shapes those tools write; each is read
into the right task and steps, recognised as its own format and by no other importer, and a bad line costs only
itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtl_graph.importers import (BadRecordError, detect_format, format_names, get_importer, import_file,
                                            importers, load_file)
from mtl_graph.importers.sessions import MAX_RECORD_BYTES
from helpers.paths import LOGS, AGENT_LOGS

CLAUDE = AGENT_LOGS / "claude_code" / "5b0c2f4e-9a1d-4c7e-8f3b-2d6a1e9c7b40.jsonl"
CODEX = AGENT_LOGS / "codex" / "rollout-2025-10-02T14-10-00-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
CODEX_OLD = AGENT_LOGS / "codex" / "rollout-2025-05-20T08-00-00-5e6f7a8b-1111-4222-8333-944455566677.jsonl"
OPENHANDS = AGENT_LOGS / "openhands" / "shelfapp-pagination.json"
OPENHANDS_EVAL = AGENT_LOGS / "openhands" / "ledger__ledger-214.json"
OPENHANDS_OUTPUT = AGENT_LOGS / "openhands" / "output.jsonl"
AIDER = AGENT_LOGS / "aider" / ".aider.chat.history.md"
FIXTURES = {CLAUDE: "claude-code", CODEX: "codex", CODEX_OLD: "codex", OPENHANDS: "openhands",
            OPENHANDS_EVAL: "openhands", OPENHANDS_OUTPUT: "openhands-eval", AIDER: "aider"}
NEW = ("claude-code", "codex", "openhands", "openhands-eval", "aider")


def test_claude_code_session() -> None:
    [run] = load_file(CLAUDE)
    assert (run.task.id, run.source_format, run.model) == ("5b0c2f4e-9a1d-4c7e-8f3b-2d6a1e9c7b40", "claude-code",
                                                           "claude-sonnet-4-20250514")
    # the caveat and the /clear echo before it are the client's, not the request
    assert run.task.instruction.startswith("slugify() in textkit/slug.py leaves a trailing dash")
    assert run.task.metadata["follow_ups"] == ["Thanks. Also run the linter on the package."]
    assert run.task.metadata["cwd"] == "/home/dev/textkit" and run.task.metadata["gitBranch"] == "fix-slug"
    assert [s.action for s in run.steps] == [
        "ls textkit tests", 'Read({"file_path": "/home/dev/textkit/textkit/slug.py"})', run.steps[2].action,
        "python -m pytest -q tests/test_slug.py", run.steps[4].action, "python -m pytest -q tests/test_slug.py",
        "ruff check textkit"]
    assert [s.tool for s in run.steps] == ["bash", "Read", "Edit", "bash", "Edit", "bash", "bash"]
    assert run.steps[2].action.startswith('Edit({"file_path": "/home/dev/textkit/tests/test_slug.py"')
    assert [s.exit_code for s in run.steps] == [0, None, None, 1, None, 0, 0]
    assert "1 failed, 1 passed" in run.steps[3].observation and run.steps[6].observation == "All checks passed!"
    # a reply's text and its call come on separate lines (one per content block): still the step's reasoning
    assert run.steps[0].reasoning == "I'll look at the helper and its tests first."
    assert run.steps[6].reasoning is None  # the answer to the first request is not the linter step's reasoning
    assert run.submission == "The linter reports no problems."
    # usage is repeated on every line of one message: counted once per message id
    assert (run.tokens.input, run.tokens.output) == (6350, 440)
    assert run.verdict is None  # the log holds no verdict
    # its code link: the session's directory, its start, the files its tools named (made relative to it)
    assert run.code.repository == "/home/dev/textkit" and run.code.commit is None and run.code.at is not None
    assert run.code.paths == ["tests/test_slug.py", "textkit/slug.py"]


def test_codex_rollout() -> None:
    [run] = load_file(CODEX)
    assert (run.task.id, run.model, run.exit_status) == ("0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", "gpt-5-codex",
                                                         "completed")
    assert run.task.instruction.startswith("The `total` command rounds each line")  # not <environment_context>
    assert run.task.metadata["cli_version"] == "0.44.0" and run.task.metadata["git_branch"] == "main"
    assert [s.action for s in run.steps][:2] == ['rg -n "def total" -S invoice',
                                                 "python -m pytest -q tests/test_total.py"]
    assert run.steps[2].tool == "apply_patch" and run.steps[2].action.startswith("*** Begin Patch\n*** Update File")
    assert (run.steps[3].action, run.steps[3].tool) == ("python -m pytest -q", "bash")  # exec_command's cmd
    # the three output spellings: JSON with metadata, "Exit code"/"Wall time" text, unified exec's header
    assert [s.exit_code for s in run.steps] == [0, 1, 0, 0]
    assert [s.duration_s for s in run.steps] == [0.1, 0.4, 0.0, 0.612]
    assert run.steps[1].observation.startswith("F ") and "Exit code" not in run.steps[1].observation
    assert run.steps[3].observation.startswith("......") and "Chunk ID" not in run.steps[3].observation
    assert run.steps[0].reasoning == "**Locating the total command**"  # the reasoning summary
    assert run.steps[1].reasoning == "Found it; checking the tests before editing."
    assert run.submission == "`total` now sums the exact amounts and rounds once; all 6 tests pass."
    assert (run.tokens.input, run.tokens.output) == (18250, 640)  # the last running total
    # its code link: session_meta's git facts, the file its apply_patch updated
    assert (run.code.repository, run.code.commit) == ("git@example.com:dev/invoice-cli.git",
                                                      "4e1f0c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f")
    assert run.code.paths == ["invoice/cli.py"] and run.code.linked


def test_codex_rollout_from_before_the_envelope() -> None:
    [run] = load_file(CODEX_OLD)
    assert run.task.id == "5e6f7a8b-1111-4222-8333-944455566677" and run.task.metadata == {"git_branch": "main"}
    assert run.task.instruction == "Add a --version flag to the CLI that prints the package version."
    assert [(s.action, s.exit_code, s.observation) for s in run.steps] == [
        ("grep -n argparse invoice/cli.py", 0, "3:import argparse\n")]
    assert run.submission == "Added `--version`."


def test_openhands_trajectory() -> None:
    [run] = load_file(OPENHANDS)
    assert (run.task.id, run.model, run.exit_status) == ("shelfapp-pagination", "anthropic/claude-sonnet-4-20250514",
                                                         "finished")
    assert run.task.instruction.startswith("paginate() in shelfapp/pages.py drops the last page")
    assert [s.tool for s in run.steps] == ["bash", "bash", "str_replace_editor", "bash"]  # system, recall: no steps
    assert run.steps[0].action == "sed -n '1,40p' shelfapp/pages.py"
    assert run.steps[0].reasoning == "Let me read the function first."
    edit = run.steps[2]
    assert edit.args["command"] == "str_replace" and "security_risk" not in edit.args and "thought" not in edit.args
    assert edit.reasoning == "The page count subtracts one too many; use ceiling division."
    assert [s.exit_code for s in run.steps] == [0, 1, None, 0]
    assert run.steps[3].observation == "..\n2 passed in 0.03s"
    assert run.submission.startswith("paginate() now uses ceiling division")  # finish's final_thought
    assert (run.tokens.input, run.tokens.output) == (21000, 470) and run.verdict is None


def test_openhands_evaluation_record_with_pairs() -> None:
    [run] = load_file(OPENHANDS_EVAL)
    assert run.task.id == "ledger__ledger-214" and run.model == "gpt-4o-2024-05-13"
    # the issue, not the template around it
    assert run.task.instruction == 'Balance.parse() rejects amounts with a leading plus sign such as "+12.50".'
    assert [(s.tool, s.exit_code) for s in run.steps] == [("bash", 0), ("ipython", None)]
    assert run.steps[1].observation.startswith("Balance(amount=Decimal('12.50'))")
    assert run.submission.startswith("diff --git a/ledger/balance.py")  # the evaluation's patch
    assert run.verdict is not None and run.verdict.status == "pass" and run.verdict.source == "given"


def test_openhands_evaluation_output_one_instance_per_line(tmp_path: Path) -> None:
    result = import_file(OPENHANDS_OUTPUT)
    assert [(t.task.id, t.source_format, t.verdict.status) for t in result.runs] == [
        ("ledger__ledger-214", "openhands-eval", "pass"), ("shelfapp__shelfapp-7", "openhands-eval", "fail")]
    assert result.lines == [1, 2] and [len(t.steps) for t in result.runs] == [2, 4]
    # a bad line costs only itself; a record without a request is its line's error
    first, second = OPENHANDS_OUTPUT.read_text().splitlines()
    unasked = json.loads(second.replace('"source": "user"', '"source": "agent"'))
    del unasked["instruction"]
    log = tmp_path / "output.jsonl"
    log.write_text("\n".join([first, '{"instance_id": "x", "history": [', json.dumps(unasked), second]) + "\n")
    result = import_file(log)
    assert [(e.line, e.reason.split(" (")[0]) for e in result.errors] == [(2, "malformed JSON"),
                                                                          (3, "no message from the user")]
    assert [t.task.id for t in result.runs] == ["ledger__ledger-214", "shelfapp__shelfapp-7"] and result.lines == [1, 4]


def test_aider_chat_history() -> None:
    result = import_file(AIDER)
    assert not result.errors and result.lines == [2, 57]  # the third session only opened and exited: no run
    first, second = result.runs
    assert first.task.instruction == ("read_rows() crashes with IndexError on blank lines at the end of the file.\n"
                                      "Skip blank lines instead.")
    assert first.task.id == "aider@2025-03-11 16:02:45" and first.model == "anthropic/claude-3-7-sonnet-20250219"
    assert [(s.action, s.tool) for s in first.steps] == [
        ("edit csvtool/reader.py", "edit"), ("python -m pytest -q tests/test_reader.py", "bash"),
        ("python -m pytest -q", "bash")]
    # the reply's own "####" heading and ">" quote (no markdown line break) stay in the reply
    assert "#### Checking\n> This heading and this quote belong to the reply." in first.steps[0].reasoning
    assert first.steps[0].observation == ("Applied edit to csvtool/reader.py\n"
                                          "Commit 7d1e2f3 fix: Skip blank rows in read_rows")
    # the confirmation prompts are dropped; aider's note on the output it added is kept
    assert first.steps[1].observation.startswith("Added 3 lines of output to the chat.")
    assert (first.tokens.input, first.tokens.output) == (3100, 412)
    assert second.task.instruction == "Which function writes the output file?" and second.model == "gpt-4o"
    assert second.steps == [] and second.submission.startswith("`write_rows()` in `csvtool/writer.py`")


@pytest.mark.parametrize("path", list(FIXTURES), ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_each_fixture_is_its_own_format_and_no_other(path: Path) -> None:
    text = path.read_text()
    assert detect_format(text) == FIXTURES[path] and import_file(path).runs[0].source_format == FIXTURES[path]
    lines = text.split("\n")
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    claimed = {imp.name for imp in importers()
               if (imp.jsonl and imp.sniff_lines(lines)) or (document is not None and imp.sniff(document))}
    assert claimed == {FIXTURES[path]}


def test_the_new_importers_claim_none_of_the_older_formats() -> None:
    older = [p for p in LOGS.rglob("*") if p.is_file() and "bad" not in p.parts]
    assert len(older) >= 10
    for path in older:
        text = path.read_text(errors="replace")
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        for name in NEW:
            imp = get_importer(name)
            assert not imp.sniff_lines(text.split("\n")), (name, path)
            assert document is None or not imp.sniff(document), (name, path)


def test_forcing_the_wrong_format_is_one_clear_line() -> None:
    [error] = import_file(CODEX, "claude-code").errors
    assert "no request from the user in the session" in str(error)
    [error] = import_file(CLAUDE, "openhands").errors  # JSONL is no JSON document
    assert str(error).startswith(f"{CLAUDE}:2: malformed JSON")
    assert "not an openhands trajectory" in str(import_file(LOGS / "swe_agent" / "django__django-11099.traj",
                                                            "openhands").errors[0])
    assert import_file(OPENHANDS, "aider").errors  # a JSON document is no chat history


# --- bad input --------------------------------------------------------------------------------------------------
def _with_bad_lines(path: Path, tmp_path: Path, missing: str) -> tuple[Path, int]:
    """The fixture with, after its third line, a malformed line, a record missing its fields, a non-UTF-8 line and
    a huge line; and its last line cut short. Returns the file and the first bad line's number."""
    raw = path.read_bytes().split(b"\n")
    bad = [b'{"type": "assistant", "message": {"content": [', missing.encode(), b'{"type": "user", "x": "\xff\xfe"}',
           b'{"pad": "' + b"x" * (MAX_RECORD_BYTES + 10) + b'"}']
    cut = raw[-2][: len(raw[-2]) // 2]
    out = tmp_path / path.name
    out.write_bytes(b"\n".join(raw[:3] + bad + raw[3:-2] + [cut]))
    return out, 4


@pytest.mark.parametrize(("path", "missing", "reason"), [
    (CLAUDE, '{"type": "user", "sessionId": "s", "uuid": "u"}', "a user record without its message object"),
    (CODEX, '{"timestamp": "2025-10-02T14:10:00Z", "type": "response_item"}',
     "a response_item line without its payload object"),
], ids=["claude-code", "codex"])
def test_bad_lines_cost_only_themselves(path: Path, missing: str, reason: str, tmp_path: Path) -> None:
    log, first_bad = _with_bad_lines(path, tmp_path, missing)
    result = import_file(log)
    good = import_file(path).runs[0]
    [run] = result.runs
    assert all(isinstance(e, BadRecordError) for e in result.errors)
    where = [(e.line, e.reason.split(" (")[0]) for e in result.errors]
    total = len(path.read_bytes().split(b"\n")) - 1 + 4
    assert where == [(first_bad, "malformed JSON"), (first_bad + 1, reason), (first_bad + 2, "not UTF-8 text"),
                     (first_bad + 3, "record too large"), (total, "the line is cut short")], where
    # every good record is kept: only the last line (cut) is lost
    assert [s.action for s in run.steps] == [s.action for s in good.steps]
    assert run.task == good.task


def test_aider_bad_lines_and_a_cut_history(tmp_path: Path) -> None:
    raw = AIDER.read_bytes()
    head, tail = raw[: raw.index(b"#### /run python -m pytest -q")], raw[raw.index(b"#### /run python -m pytest -q"):]
    log = tmp_path / ".aider.chat.history.md"
    log.write_bytes(head + b"> caf\xe9 au lait  \n" + b"x" * (MAX_RECORD_BYTES + 1) + b"\n" + tail[:200])
    result = import_file(log)
    bad_line = head.count(b"\n") + 1
    assert [(e.line, e.reason.split(" (")[0]) for e in result.errors] == [(bad_line, "not UTF-8 text"),
                                                                          (bad_line + 1, "record too large")]
    # the history stops inside the second session's banner: that session holds no request yet, so no run
    [first] = result.runs
    assert [s.action for s in first.steps] == [s.action for s in import_file(AIDER).runs[0].steps]


@pytest.mark.parametrize("name", ["session.jsonl", "rollout.jsonl", "trajectory.json", ".aider.chat.history.md"])
def test_empty_and_blank_files_are_one_line(name: str, tmp_path: Path) -> None:
    for content in (b"", b"\n\n  \n"):
        log = tmp_path / name
        log.write_bytes(content)
        for fmt in (None, *NEW):
            [error] = import_file(log, fmt).errors
            assert str(error).startswith(f"{log}") and len(str(error).splitlines()) == 1


@pytest.mark.parametrize(("fmt", "content", "message"), [
    ("claude-code", {"type": "assistant", "sessionId": "s", "message": {"content": [{"type": "text", "text": "hi"}]}},
     "no request from the user in the session"),
    ("claude-code", {"type": "assistant", "sessionId": "s",
                     "message": {"id": "m", "content": "x", "usage": {"input_tokens": "lots"}}},
     "message.usage.input_tokens is not a token count"),
    ("codex", {"type": "session_meta", "payload": {"id": "x"}}, "no request from the user in the rollout"),
    ("codex", {"type": "event_msg",
               "payload": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": True}}}},
     "total_token_usage.input_tokens is not a token count"),
], ids=["claude-no-request", "claude-bad-usage", "codex-no-request", "codex-bad-usage"])
def test_records_missing_what_a_run_needs(fmt: str, content: dict, message: str, tmp_path: Path) -> None:
    log = tmp_path / "one.jsonl"
    log.write_text(json.dumps(content) + "\n")
    result = import_file(log, fmt)
    assert not result.runs and message in str(result.errors[0]) and result.errors[0].line == 1


@pytest.mark.parametrize(("content", "message"), [
    ('[{"id": 0, "source": "agent", "action": "run", "args": {"command": "ls"}}]', "no message from the user"),
    ('[{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}, 7]', "not an openhands trajectory"),
    ('[{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}', "malformed JSON"),
    ('[{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}, '
     '"llm_metrics": {"accumulated_token_usage": {"prompt_tokens": "many"}}}]', "prompt_tokens is not a token count"),
], ids=["no-request", "not-an-event", "truncated", "bad-usage"])
def test_openhands_bad_documents_are_one_line(content: str, message: str, tmp_path: Path) -> None:
    log = tmp_path / "trajectory.json"
    log.write_text(content)
    [error] = import_file(log, "openhands").errors
    assert message in str(error) and str(error).startswith(str(log)) and "\n" not in str(error)


def test_every_new_format_is_registered_and_described() -> None:
    assert set(NEW) <= set(format_names())
    assert all(get_importer(name).summary for name in NEW)


def test_openhands_edit_arguments_come_from_the_kept_model_response(tmp_path: Path) -> None:
    """An edit action keeps only some of its arguments (no ``command``, no ``file_text``); the model's call, kept in
    ``tool_call_metadata.model_response``, has them all."""
    call = {"id": "toolu_9", "type": "function", "function": {"name": "str_replace_editor", "arguments": json.dumps(
        {"command": "create", "path": "/workspace/hello.py", "file_text": "print('hello')\n"})}}
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "Write hello.py"}},
        {"id": 1, "source": "agent", "action": "edit",
         "tool_call_metadata": {"function_name": "str_replace_editor", "tool_call_id": "toolu_9",
                                "model_response": {"model": "claude-3-5-sonnet-20241022",
                                                   "choices": [{"message": {"tool_calls": [call]}}]}},
         "args": {"path": "/workspace/hello.py", "content": "", "start": 1, "end": -1, "thought": "Create it."}},
        {"id": 2, "source": "agent", "cause": 1, "observation": "edit", "content": "File created.", "extras": {}},
    ]
    log = tmp_path / "hello.json"
    log.write_text(json.dumps(events))
    [run] = load_file(log)
    [step] = run.steps
    assert step.args == {"command": "create", "path": "/workspace/hello.py", "file_text": "print('hello')\n"}
    assert step.action.startswith('str_replace_editor({"command": "create"') and step.observation == "File created."
    assert run.model == "claude-3-5-sonnet-20241022" and step.reasoning == "Create it."


@pytest.mark.parametrize("path", [CLAUDE, CODEX], ids=["claude-code", "codex"])
def test_junk_lines_near_the_top_do_not_hide_the_format(path: Path, tmp_path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    log = tmp_path / path.name
    log.write_text(lines[0] + '"a stray string"\n42\n[1]\n{"unrelated": true}\n' + "".join(lines[1:]))
    result = import_file(log)
    assert [(e.line, e.reason) for e in result.errors] == [(n, "expected a JSON object per line") for n in (2, 3, 4)]
    assert [s.action for s in result.runs[0].steps] == [s.action for s in import_file(path).runs[0].steps]
    # a log that is mostly something else is not taken for one of these for one look-alike line
    other = tmp_path / "other.jsonl"
    other.write_text(lines[1] + "".join(json.dumps({"n": i}) + "\n" for i in range(3)))
    assert detect_format(other.read_text()) is None


def test_files_with_no_conversation_are_skipped_not_failed(tmp_path: Path) -> None:
    summaries = tmp_path / "old-session.jsonl"  # older Claude Code clients wrote files of summary lines only
    summaries.write_text(json.dumps({"type": "summary", "summary": "Slug fix", "leafUuid": "u1"}) + "\n")
    history = tmp_path / ".aider.chat.history.md"
    history.write_text("\n# aider chat started at 2025-03-12 09:40:00\n\n> Aider v0.78.0  \n\n#### /exit  \n")
    for log, fmt in ((summaries, "claude-code"), (history, "aider")):
        result = import_file(log)
        assert not result.runs and not result.errors and result.skipped is not None, fmt
        assert str(result.skipped).startswith(f"{log}: not a run")


def test_a_sub_agent_file_is_a_run_on_the_delegated_task(tmp_path: Path) -> None:
    records = [json.loads(line) for line in CLAUDE.read_text().splitlines()]
    log = tmp_path / "agent-3f2a9c1d.jsonl"
    log.write_text("".join(json.dumps({**r, "isSidechain": True}) + "\n" for r in records if r["type"] != "summary"))
    [run] = load_file(log)
    assert run.task.instruction == load_file(CLAUDE)[0].task.instruction and len(run.steps) == 7


def test_a_session_opening_with_the_clients_own_lines_is_still_claude_code(tmp_path: Path) -> None:
    """Newer clients write progress, queue and snapshot lines beside the conversation, many at a time."""
    lines = CLAUDE.read_text().splitlines(keepends=True)
    noise = [json.dumps({"type": kind, "sessionId": "5b0c2f4e", "timestamp": "2025-07-14T09:00:00Z",
                         "data": {"n": i}}) + "\n" for i, kind in enumerate(["progress", "queue-operation"] * 40)]
    noise.append(json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}) + "\n")
    log = tmp_path / CLAUDE.name
    log.write_text("".join(noise) + "".join(lines))
    assert detect_format(log.read_text()) == "claude-code"
    [run] = import_file(log).runs
    assert [s.action for s in run.steps] == [s.action for s in load_file(CLAUDE)[0].steps]
    only = tmp_path / "snapshots.jsonl"
    only.write_text("".join(noise[-1:]) * 3)
    assert import_file(only).skipped is not None  # the client's lines alone: no conversation, not a run
