"""`mtl run --review-memories` and `--approve-commands`: a person answers on the terminal (CliRunner feeds the
answers; the terminal check is the only thing stood in for), scripted model, real sandbox, real pool and run log."""

import json
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app, human
from helpers.paths import EXAMPLES

SCRIPT = EXAMPLES / "slugify" / "demo_script.json"
runner = CliRunner()


@pytest.fixture
def terminal(monkeypatch, tmp_path):
    """stdin is a terminal; workspaces go under tmp_path (to see them removed)."""
    monkeypatch.setattr(human, "stdin_is_terminal", lambda: True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def run(tmp_path, *flags, answers="", json_out=False):
    args = ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{SCRIPT}", "--memory", "trajectory",
            "--pool", str(tmp_path / "pool"), *flags, *(["--json"] if json_out else [])]
    return runner.invoke(app, args, input=answers)


def pool_size(tmp_path) -> int:
    listed = runner.invoke(app, ["memories", "list", "--json", "--pool", str(tmp_path / "pool")])
    assert listed.exit_code == 0, listed.output
    return len(json.loads(listed.stdout))


def log_lines(tmp_path) -> list[dict]:
    path = tmp_path / "runs.jsonl"  # MTL_RUN_LOG (conftest)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def workspaces_left(tmp_path) -> list[Path]:
    root = tmp_path / "mtl-workspaces"
    return list(root.iterdir()) if root.exists() else []


def test_approving_the_proposed_memories_writes_them(terminal):
    result = run(terminal, "--review-memories", answers="a\n")
    assert result.exit_code == 0, result.output
    assert "1 memories proposed (verdict: pass)" in result.output
    assert "1/1 trajectory (success)" in result.output and "Task: Implement `slugify(text)`" in result.output  # what is proposed
    assert "review  1 approved, 0 edited, 0 rejected" in result.output
    assert pool_size(terminal) == 1
    [line] = log_lines(terminal)
    assert len(line["reviewed"]["approved"]) == 1 and line["reviewed"]["rejected"] == []
    assert line["new_memory_ids"] == line["reviewed"]["approved"] and workspaces_left(terminal) == []


def test_rejecting_writes_nothing_and_json_keeps_stdout_for_the_result(terminal):
    result = run(terminal, "--review-memories", answers="n\n", json_out=True)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)  # the questions went to stderr
    assert out["verdict"]["status"] == "pass" and out["new_memory_ids"] == []
    assert out["reviewed"]["approved"] == [] and len(out["reviewed"]["rejected"]) == 1
    assert "Write memory 1?" in result.stderr
    assert pool_size(terminal) == 0 and log_lines(terminal)[0]["reviewed"] == out["reviewed"]


def test_a_bad_answer_is_asked_again(terminal):
    result = run(terminal, "--review-memories", answers="maybe\n\ny\n")
    assert result.exit_code == 0, result.output
    assert "Please select one of the available options" in result.output and result.output.count("Write memory 1?") == 3
    assert pool_size(terminal) == 1


def test_no_answer_to_the_review_writes_nothing_and_says_so(terminal):
    result = run(terminal, "--review-memories", answers="")
    assert result.exit_code == 1
    assert "error: stopped: a question got no answer" in result.output
    assert pool_size(terminal) == 0 and len(log_lines(terminal)) == 1 and workspaces_left(terminal) == []


def test_without_a_terminal_the_run_does_not_start(tmp_path):
    for flags in (["--review-memories"], ["--approve-commands"]):
        result = run(tmp_path, *flags, answers="a\n")
        assert result.exit_code == 1
        [line] = result.output.strip().splitlines()
        assert line.startswith(f"error: {flags[0]} asks questions on the terminal, but stdin is not a terminal")
    assert log_lines(tmp_path) == [] and not (tmp_path / "pool").exists()
    review_from_env = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{SCRIPT}"],
                                    env={"MTL_REVIEW_MEMORIES": "true"})
    assert review_from_env.exit_code == 1 and "error: --review-memories asks questions" in review_from_env.output
    bad_env = runner.invoke(app, ["run", str(EXAMPLES / "slugify")], env={"MTL_APPROVE_COMMANDS": "maybe"})
    assert bad_env.exit_code == 1 and bad_env.output.startswith("error: environment: invalid MTL_APPROVE_COMMANDS")
    demo = runner.invoke(app, ["demo", "--review-memories", "--pool", str(tmp_path / "pool")])
    assert demo.exit_code == 1 and demo.output.startswith("error: --review-memories asks questions: use it with `mtl run`")


def test_approving_every_command_runs_the_task_then_its_memory_is_reviewed(terminal):
    result = run(terminal, "--approve-commands", "--review-memories", answers="y\ny\ny\ny\nr\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count("Run it?") == 4 and "the agent wants to run: submit" in out
    assert "ls && cat slug.py test_slug.py" in out and "PASS (by tests)" in out
    assert out.index("the agent wants to run: bash") < out.index("$ ls && cat")  # asked before it ran
    assert pool_size(terminal) == 0  # r: rejected
    [line] = log_lines(terminal)
    assert line["verdict"]["status"] == "pass" and len(line["steps"]) == 4 and len(line["reviewed"]["rejected"]) == 1


def test_declining_a_command_stops_the_run_cleanly(terminal):
    result = run(terminal, "--approve-commands", answers="y\nn\n")
    assert result.exit_code == 1
    last = result.output.strip().splitlines()[-1]
    assert last == "error: stopped before running bash (declined): cat > slug.py <<'PY'"
    [line] = log_lines(terminal)
    assert line["error"] == "stopped before running bash (declined): cat > slug.py <<'PY'"
    assert line["exit_status"] == "declined" and [s["action"] for s in line["steps"]] == ["ls && cat slug.py test_slug.py"]
    assert line["verdict"]["status"] == "error" and line["new_memory_ids"] == []
    assert pool_size(terminal) == 0 and workspaces_left(terminal) == []


def test_no_answer_to_a_command_stops_the_run_before_it(terminal):
    result = run(terminal, "--approve-commands", answers="")
    assert result.exit_code == 1
    assert "error: stopped before running bash (no answer): ls && cat slug.py test_slug.py" in result.output
    [line] = log_lines(terminal)
    assert line["steps"] == [] and line["exit_status"] == "declined" and workspaces_left(terminal) == []


def test_commands_with_markup_are_shown_as_typed(terminal):
    script = terminal / "hostile.json"
    hostile = "echo '[/]' '[bold red]x[/bold red]' '[link=file:///etc]y[/link]'"
    script.write_text(json.dumps({"actions": [{"bash": hostile}, {"submit": "[/] done"}]}))
    args = ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{script}", "--memory", "none",
            "--pool", str(terminal / "pool"), "--approve-commands"]
    result = runner.invoke(app, args, input="y\ny\n")
    assert result.exit_code == 0, result.output  # no MarkupError: what the agent typed is text, not markup
    assert hostile in result.output and "[/] done" in result.output
    [line] = log_lines(terminal)
    assert line["steps"][0]["observation"] == "[/] [bold red]x[/bold red] [link=file:///etc]y[/link]\n"


def memories(n: int) -> list[dict]:
    from mtl_graph.memory.base import parse_memory

    return [parse_memory({"type": "insight", "outcome": "success", "title": f"Lesson {i}",
                          "description": f"When {i}.", "content": f"Do thing {i} [/] first."}).model_dump(mode="json")
            for i in range(n)]


@pytest.mark.parametrize(("answers", "expected"), [
    ("y\nn\ny\n", ["approve", "reject", "approve"]),
    ("n\na\n", ["reject", "approve", "approve"]),
    ("y\nr\n", ["approve", "reject", "reject"]),
    ("y\n", ["approve", "reject", "reject"]),  # input ends: the rest are not written
])
def test_each_proposed_memory_gets_its_own_answer(monkeypatch, answers, expected):
    import io

    from rich.console import Console

    from mtl_graph.pipeline.review import apply_review

    monkeypatch.setattr("sys.stdin", io.StringIO(answers))
    out = io.StringIO()
    asker = human.Asker(Console(file=out, width=100))
    proposed = memories(3)
    payload = human.MemoryReviewer(asker)({"memories": proposed, "verdict": "pass"})
    assert payload == {"decisions": expected}
    kept, reviewed = apply_review(proposed, payload)  # the format the review node accepts
    assert [m["id"] for m in kept] == [m["id"] for m, d in zip(proposed, expected) if d == "approve"]
    assert asker.unanswered == (answers == "y\n")
    shown = out.getvalue()
    assert "insight (success) Lesson 0" in shown and "Do thing 0 [/] first." in shown


def converse(proc, master: int, question: bytes, answers: list[bytes]) -> str:
    """Read the child's terminal; each time `question` appears once more, type the next answer. The whole output."""
    import os
    import select
    import time

    seen, sent = b"", 0
    deadline = time.monotonic() + 90  # a safety net against a hang, not a timing check
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
        if sent < len(answers) and seen.count(question) > sent:
            os.write(master, answers[sent])
            sent += 1
    return seen.decode(errors="replace")


def test_a_real_terminal_is_asked(tmp_path):
    """No stand-in: `mtl` in a pseudo-terminal, answering each question as it appears."""
    import os
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "mtl_graph.cli", "run", str(EXAMPLES / "slugify"), "--model",
                             f"scripted:{SCRIPT}", "--memory", "trajectory", "--pool", str(tmp_path / "pool"),
                             "--approve-commands", "--review-memories"],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    try:
        text = converse(proc, master, b"Run it?", [b"y\n", b"y\n", b"n\n"])  # decline the test run
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 1, text
    assert "error: stopped before running bash (declined): python3 -m unittest -q test_slug" in text
    [line] = log_lines(tmp_path)
    assert [s["action"].splitlines()[0] for s in line["steps"]] == ["ls && cat slug.py test_slug.py",
                                                                     "cat > slug.py <<'PY'"]
    assert line["exit_status"] == "declined" and not list((tmp_path / f"mtl-workspaces-{os.geteuid()}").iterdir())


def test_a_proposal_that_is_not_a_memory_is_shown_as_it_came_and_still_asked(monkeypatch):
    import io

    from rich.console import Console

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    out = io.StringIO()
    asker = human.Asker(Console(file=out, width=100))
    payload = human.MemoryReviewer(asker)({"memories": [{"type": "insight", "title": "[red]no content"}],
                                           "error": "1 decisions for 2 memories [/]"})
    assert payload == {"decisions": ["reject"]}
    shown = out.getvalue()
    assert "1/1 not a valid memory" in shown and '"title": "[red]no content"' in shown
    assert "1 decisions for 2 memories [/]" in shown  # why the previous answer was refused
