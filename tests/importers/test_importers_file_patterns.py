"""Directory search reads the files the registered importers declare (`Importer.file_patterns`): Aider's hidden
`.aider.chat.history.md` is found, a hidden file no importer names is not, and a new importer's pattern is read
with no change to the search."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.importers import Importer, RegistrationError, iter_log_files, load_many, register, unregister
from mtl_graph.importers.registry import DEFAULT_PATTERNS, file_patterns, reads_file_name
from helpers.paths import AGENT_LOGS

AIDER = AGENT_LOGS / "aider" / ".aider.chat.history.md"
CLAUDE = AGENT_LOGS / "claude_code" / "5b0c2f4e-9a1d-4c7e-8f3b-2d6a1e9c7b40.jsonl"


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A repository-like directory: an Aider history (hidden), a Claude Code session, and files no importer reads."""
    root = tmp_path / "logs"
    (root / "session").mkdir(parents=True)
    shutil.copy(AIDER, root / AIDER.name)
    shutil.copy(CLAUDE, root / "session" / CLAUDE.name)
    (root / ".env.json").write_text('{"TOKEN": "not a log"}\n')  # hidden: "*.json" does not read it
    (root / ".aider.input.history").write_text("+fix the reader\n")  # aider's other hidden file
    (root / "README.md").write_text("# aider chat started at 2025-01-01 00:00:00\n")  # not a declared name
    (root / ".git").mkdir()
    shutil.copy(AIDER, root / ".git" / AIDER.name)  # a hidden directory is never searched
    return root


def test_directory_search_picks_the_aider_history_and_the_claude_session_only(mixed: Path) -> None:
    found = sorted(p.relative_to(mixed).as_posix() for p in iter_log_files([mixed]))
    assert found == [".aider.chat.history.md", f"session/{CLAUDE.name}"]
    loaded, errors = load_many([mixed])
    assert errors == []
    assert sorted({item.trajectory.source_format for item in loaded}) == ["aider", "claude-code"]
    assert len(loaded) == 3  # the fixture history holds two sessions, the Claude Code file one


def test_mtl_ingest_of_the_directory_plans_the_three_runs(mixed: Path) -> None:
    result = CliRunner().invoke(app, ["ingest", str(mixed), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert re.search(r"planned\s*│\s*3\b", result.output), result.output
    assert re.search(r"bad files or lines\s*│\s*0", result.output), result.output


def test_hidden_names_need_a_pattern_that_starts_with_a_dot() -> None:
    assert ".aider.chat.history.md" in file_patterns() and set(DEFAULT_PATTERNS) <= set(file_patterns())
    assert reads_file_name("run.traj") and reads_file_name("a.traj.json") and reads_file_name("s.jsonl")
    assert not reads_file_name(".s.jsonl") and not reads_file_name("notes.md") and not reads_file_name("x.JSON")


class MarkdownLogImporter(Importer):
    """A format of this test only: ``*.runlog.md`` text files."""

    name = "toy-md"
    summary = "toy markdown logs"
    order = 4
    jsonl = True
    file_patterns = ("*.runlog.md",)

    def sniff_lines(self, lines: list[str]) -> bool:
        return bool(lines) and lines[0].startswith("RUNLOG ")

    def parse_lines(self, lines, path: Path):
        from mtl_graph.importers.common import FileImport

        text = b"".join(lines).decode("utf-8").splitlines()
        steps = [Step(action=line[2:]) for line in text[1:] if line.startswith("$ ")]
        return FileImport(path, runs=[Trajectory(task=TaskRef(id=path.name, instruction=text[0][7:]), steps=steps)])


def test_a_new_importer_declares_its_files_and_search_reads_them(tmp_path: Path) -> None:
    (tmp_path / "a.runlog.md").write_text("RUNLOG count lines\n$ wc -l data.txt\n")
    (tmp_path / "b.md").write_text("RUNLOG not declared\n")
    assert list(iter_log_files([tmp_path])) == []
    register(MarkdownLogImporter)
    try:
        assert [p.name for p in iter_log_files([tmp_path])] == ["a.runlog.md"]
        loaded, errors = load_many([tmp_path])
        assert errors == [] and [item.trajectory.steps[0].action for item in loaded] == ["wc -l data.txt"]
    finally:
        unregister(MarkdownLogImporter.name)
    assert list(iter_log_files([tmp_path])) == []


@pytest.mark.parametrize("patterns", [(), ["*.md"], ("",), ("logs/*.md",), (" *.md",), ("*.md", 3)])
def test_bad_file_patterns_are_refused_at_registration(patterns: Any) -> None:
    bad = type("BadPatterns", (Importer,), {"name": "toy-bad", "file_patterns": patterns})
    with pytest.raises(RegistrationError, match="file_patterns must be a non-empty tuple"):
        register(bad)
    from mtl_graph.importers import get_importer

    assert get_importer("toy-bad") is None
