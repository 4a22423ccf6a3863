"""`mtl ingest` on the session logs of Claude Code, Codex CLI, OpenHands and Aider: the format is picked from the
content, a bad line is one line of the report, and a secret in a command or its output never reaches the pool
(real embedded pool, real local embedder)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import AGENT_LOGS

CLAUDE = AGENT_LOGS / "claude_code" / "5b0c2f4e-9a1d-4c7e-8f3b-2d6a1e9c7b40.jsonl"
CODEX = AGENT_LOGS / "codex" / "rollout-2025-10-02T14-10-00-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl"
OPENHANDS = AGENT_LOGS / "openhands" / "shelfapp-pagination.json"
AIDER = AGENT_LOGS / "aider" / ".aider.chat.history.md"
# made up for this test, in the shapes of a GitHub token and an AWS secret key
TOKEN = "ghp_" + "x7Kq2Lm9Pz4Rt8Vw1Ny5Bc3Df6Gh0Jk2Ls4Qa"
AWS = "Qm8vT2xR5nB7kW1pZ4cY6hJ9dF3sL0aG2eU5iO8t"
CLONE = f"git clone https://{TOKEN}@github.com/acme/app.git"
LEAK = f"export AWS_SECRET_ACCESS_KEY={AWS}"
# per log: a command of it to replace with CLONE, and an output of it to replace with LEAK
LEAKS = {CLAUDE: ("ls textkit tests", "All checks passed!"),
         CODEX: ("python -m pytest -q tests/test_total.py", "6 passed in 0.09s"),
         OPENHANDS: ("python -m pytest -q tests/test_pages.py", "2 passed in 0.03s"),
         AIDER: ("python -m pytest -q tests/test_reader.py", "Commit 7d1e2f3 fix: Skip blank rows in read_rows")}


def ingest(*args: object):
    return CliRunner().invoke(app, ["ingest", *map(str, args)])


@pytest.mark.parametrize(("path", "fmt", "runs"), [(CLAUDE, "claude-code", 1), (CODEX, "codex", 1),
                                                   (OPENHANDS, "openhands", 1), (AIDER, "aider", 2)],
                         ids=["claude-code", "codex", "openhands", "aider"])
def test_ingest_picks_the_format_from_the_content(path: Path, fmt: str, runs: int) -> None:
    result = ingest(path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert re.search(rf"planned\s*│\s*{runs}\b", result.output)
    assert re.search(r"bad files or lines\s*│\s*0", result.output)
    forced = ingest(path, "--format", fmt, "--dry-run")
    assert forced.exit_code == 0 and re.search(rf"planned\s*│\s*{runs}\b", forced.output), forced.output


def test_a_bad_line_is_one_line_of_the_report(tmp_path: Path) -> None:
    lines = CLAUDE.read_text().splitlines(keepends=True)
    log = tmp_path / CLAUDE.name
    log.write_text("".join(lines[:3]) + '{"type": "user", "message": \n' + "".join(lines[3:]))
    result = ingest(log, "--dry-run")
    assert result.exit_code == 1, result.output
    assert re.search(rf"bad line: \S*{re.escape(CLAUDE.name)}:4: malformed JSON", result.output), result.output
    assert re.search(r"planned\s*│\s*1\b", result.output)  # the session is still read


def test_a_file_of_no_known_format_names_every_format(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nNot a log.\n")
    result = ingest(notes, "--dry-run")
    assert result.exit_code == 1 and "unknown log format" in result.output
    assert all(name in result.output for name in ("claude-code", "codex", "openhands", "aider")), result.output


def test_secrets_in_commands_and_outputs_never_reach_the_pool(tmp_path: Path, embeddings) -> None:
    logs = []
    for path, (command, output) in LEAKS.items():
        text = path.read_text()
        assert command in text and output in text
        leaky = tmp_path / path.parent.name / path.name
        leaky.parent.mkdir()
        if path == AIDER:  # its later sessions: a question with no action (no trajectory memory) and an empty one
            text = text[: text.index("# aider chat started at 2025-03-12")]
        leaky.write_text(text.replace(command, CLONE).replace(output, LEAK))
        logs.append(leaky)
    pool_dir = tmp_path / "pool"
    result = ingest(*logs, "--pool", pool_dir, "--formats", "trajectory")
    assert result.exit_code == 0, result.output
    assert re.search(r"ingested\s*│\s*4\b", result.output), result.output
    with MemoryPool.open(str(pool_dir), embeddings=embeddings) as pool:
        memories = [json.loads(m.model_dump_json()) for m in pool]
    text = json.dumps(memories)
    assert TOKEN not in text and AWS not in text
    # the commands are kept, only the secret inside them is masked: in the memory of every log
    masked = "git clone https://[REDACTED:github_token]@github.com/acme/app.git"
    assert len(memories) == 4 and all(masked in [step["command"] for step in m["steps"]] for m in memories)
    assert text.count("AWS_SECRET_ACCESS_KEY=[REDACTED:") >= 4
    assert {m["sources"][0]["source_task_id"] for m in memories} >= {"5b0c2f4e-9a1d-4c7e-8f3b-2d6a1e9c7b40",
                                                                     "shelfapp-pagination"}
