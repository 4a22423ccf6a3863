"""The importer registry: every format is an `Importer` its own module registers; detection, `--format` and its
help come from the registry, so a new importer is one module (plus its test) and nothing else."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest
import typer
from typer.testing import CliRunner

import mtl_graph.importers as package
import mtl_graph.importers.agents as agents_package
from mtl_graph.cli.ingest import ingest as ingest_command
from mtl_graph.importers import (FORMATS, FileImport, Importer, RegistrationError, detect_format,
                                            format_names, get_importer, import_file, importers, register, unregister)
from mtl_graph.importers import registry
from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import Step, Trajectory

TOY_LOG = {"toy_log": 1, "task": "add two numbers", "commands": [["echo $((1 + 2))", "3"]]}


class ToyImporter(Importer):
    """A log format of this test only: {"toy_log": 1, "task", "commands": [[command, output], ...]}."""

    name = "toy"
    summary = "the toy logs of this test"
    order = 5  # before every built-in: its logs are JSON objects the others would not know anyway

    def sniff(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("toy_log") == 1

    def parse(self, data: Any, path: Path) -> list[Trajectory]:
        steps = [Step(action=command, observation=output) for command, output in data["commands"]]
        return [Trajectory(task=TaskRef(id=path.stem, instruction=data["task"]), steps=steps)]


class ToyLinesImporter(Importer):
    """A JSONL format of this test only: one {"toy_line": command} object per line."""

    name = "toy-lines"
    jsonl = True

    def sniff_lines(self, lines: list[str]) -> bool:
        return bool(lines) and all('"toy_line"' in line for line in lines if line.strip())

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> FileImport:
        result = FileImport(path)
        for n, raw in enumerate(lines, 1):
            command = json.loads(raw)["toy_line"]
            result.runs.append(Trajectory(task=TaskRef(id=f"{path.stem}-{n}", instruction="toy"),
                                          steps=[Step(action=command)]))
            result.lines.append(n)
        return result


@pytest.fixture
def toy() -> Iterator[None]:
    register(ToyImporter)
    register(ToyLinesImporter)
    yield
    unregister(ToyImporter.name)
    unregister(ToyLinesImporter.name)


def test_the_built_in_importers_in_detection_order() -> None:
    built_in = ("mtl-runlog", "claude-code", "codex", "openhands", "openhands-eval", "aider", "swe-agent",
                "mini-swe-agent", "langchain")  # the registry is open: an importer added beside them is found too
    assert tuple(name for name in format_names() if name in built_in) == built_in and format_names() == FORMATS
    assert all(imp.summary for imp in importers())  # each is described in `mtl ingest --help`
    assert type(get_importer("swe-agent")).__name__ == "SWEAgentImporter" and get_importer("no-such-agent") is None


def test_a_registered_importer_is_detected_forced_and_listed(tmp_path: Path, toy: None) -> None:
    log = tmp_path / "sum.json"
    log.write_text(json.dumps(TOY_LOG))
    assert detect_format(log.read_text()) == "toy" and format_names()[0] == "toy" and "toy" in package.FORMATS
    [run] = import_file(log).runs
    assert (run.task.id, run.source_format, [s.observation for s in run.steps]) == ("sum", "toy", ["3"])
    # forced: a toy log read as a SWE-agent log is that importer's own one-line error
    assert "not a swe-agent log" in str(import_file(log, "swe-agent").errors[0])
    lines = tmp_path / "cmds.jsonl"
    lines.write_text('{"toy_line": "ls"}\n{"toy_line": "pwd"}\n')
    result = import_file(lines)
    assert [t.source_format for t in result.runs] == ["toy-lines", "toy-lines"] and result.lines == [1, 2]


def test_the_cli_takes_and_lists_a_registered_importer(tmp_path: Path, toy: None) -> None:
    app = typer.Typer()
    app.command()(ingest_command)
    app.command("noop")(lambda: None)
    log = tmp_path / "sum.json"
    log.write_text(json.dumps(TOY_LOG))
    result = CliRunner().invoke(app, ["ingest", str(log), "--format", "toy", "--dry-run"])
    assert result.exit_code == 0 and "planned" in result.output, result.output
    helped = CliRunner().invoke(app, ["ingest", "--help"], env={"COLUMNS": "200"})
    assert "toy (the toy logs of this test)" in helped.output and "mtl-runlog" in helped.output, helped.output


def test_after_unregister_the_format_is_gone(tmp_path: Path) -> None:
    register(ToyImporter)
    unregister(ToyImporter.name)
    log = tmp_path / "sum.json"
    log.write_text(json.dumps(TOY_LOG))
    assert "toy" not in format_names()
    [error] = import_file(log).errors
    assert f"unknown log format (expected one of: {', '.join(format_names())})" in str(error)
    assert "mtl-runlog, claude-code" in str(error)
    assert "unknown format 'toy'" in str(import_file(log, "toy").errors[0])


def test_names_are_checked() -> None:
    class Nameless(Importer):
        pass

    class Impostor(Importer):
        name = "langchain"

    with pytest.raises(RegistrationError, match="needs a name"):
        register(Nameless)
    with pytest.raises(RegistrationError, match="'langchain' is taken by LangChainImporter"):
        register(Impostor)
    assert type(get_importer("langchain")).__name__ == "LangChainImporter"


def test_a_module_in_the_package_registers_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # agents/' modules are found with pkgutil: a module on its path is imported and its @register runs
    (tmp_path / "toy_format.py").write_text(
        "from mtl_graph.importers.registry import Importer, register\n\n\n"
        "@register\nclass ToyFormat(Importer):\n    name = 'toy-module'\n    summary = 'found by discovery'\n")
    monkeypatch.setattr(agents_package, "__path__", [*agents_package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_discovered", False)
    try:
        assert "toy-module" in format_names()
    finally:
        unregister("toy-module")
        sys.modules.pop(f"{agents_package.__name__}.toy_format", None)
        importlib.invalidate_caches()
    assert "toy-module" not in format_names()


def test_reading_the_registry_loads_the_importers_and_not_the_ingest_engine() -> None:
    # discovery imports agents/ only: the engine beside it (distillers, judges, LangChain) stays unloaded
    code = ("import sys\nfrom mtl_graph.importers import format_names\nnames = format_names()\n"
            "print(len(names), 'mtl_graph.importers.ingest' in sys.modules, 'mtl_graph.distill.distillers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) >= 8 and out[1:] == ["False", "False"]
