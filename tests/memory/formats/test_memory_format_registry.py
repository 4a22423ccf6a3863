"""Memory formats are a registry. A format declared here at test time (a model, a draft, one prompt file) is a
choice of the run settings, Studio's form and the pool view, is named by the CLI help, has a distiller, is
distilled by a scripted model, stored in and retrieved from a real pool; unregistered, it is gone everywhere."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field, ValidationError
from typer.testing import CliRunner

from mtl_graph.llm.scripted import ScriptedChatModel
from mtl_graph.core.task import TaskRef
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.distill.distillers import DISTILLERS, DistillResult, ModelDistiller, distill
from mtl_graph.memory import formats
from mtl_graph.memory.formats import FormatError, MemoryFormat, registered
from mtl_graph.memory.base import MEMORY_CLASSES, MemoryBase, MemoryType, Outcome, Text, memory_type_of, parse_memory
from mtl_graph.memory.formats.insight import InsightMemory
from helpers.paths import FIXTURES

PAPER = ["trajectory", "workflow", "summary", "insight"]
BUILT_IN = [*PAPER, "reasoningbank"]
"""The paper's four formats (MemoryType's members), then the baselines'. The registry is open: a format module
added beside them is registered too, so these tests hold the built-ins' order, not the whole list."""


def built_in(names: list[str]) -> list[str]:
    return [name for name in names if name in BUILT_IN]
TIP = "Rerun the exact failing command after every edit, so each change is checked against the same evidence."
runner = CliRunner()


class ToyMemory(MemoryBase):
    """One tip to follow on another task."""

    type: Literal["toy"] = "toy"
    tip: Text
    """The tip (the retrieval key)."""


class ToyDraft(BaseModel):
    """One tip to follow on another task."""

    tip: str = Field(min_length=10, max_length=300, description="One sentence another agent could follow.")


TOY = MemoryFormat(name="toy", memory=ToyMemory, summary="one tip", key=lambda m: m.tip,
                   label=lambda m: f"tip{m.outcome_tag()}", body=lambda m, chars: m.tip, draft=ToyDraft,
                   prompts=("toy", "toy"), prompt_dir=FIXTURES / "toy_format",
                   task_free=True)


@pytest.fixture
def toy():
    with registered(TOY) as fmt:
        yield fmt
    assert "toy" not in formats.names()


def run_of(status: VerdictStatus = VerdictStatus.PASS) -> Trajectory:
    return Trajectory(task=TaskRef(id="toy-1", domain="toys", instruction="Make the greeting script print hello."),
                      steps=[Step(action="python greet.py", observation="hallo", exit_code=0),
                             Step(action="sed -i s/hallo/hello/ greet.py && python greet.py", observation="hello")],
                      verdict=Verdict(status=status, reason="tests passed", source="tests"), model="task-model")


def test_the_built_in_formats_are_discovered_one_module_each() -> None:
    assert built_in(formats.names()) == BUILT_IN and [t.value for t in MemoryType][:4] == PAPER
    help_names = formats.help_names()  # the help's names, read without importing a format module
    assert help_names == sorted(help_names) and set(help_names) == set(formats.names())
    for fmt in formats.all_formats():
        assert fmt.memory.__module__ == f"mtl_graph.memory.formats.{fmt.name}"
        assert MEMORY_CLASSES[fmt.name] is fmt.memory and fmt.name in DISTILLERS
    assert [f.name for f in formats.all_formats() if not f.needs_model and f.name in BUILT_IN] == ["trajectory"]
    assert [name for name in [*BUILT_IN, "none"] if not formats.uses_plan(name)] == ["trajectory", "reasoningbank",
                                                                                 "none"]
    assert formats.model_written(["trajectory", "insight"]) == ["insight"] and not formats.needs_model(["trajectory"])


def test_a_registered_format_is_a_choice_everywhere(toy: MemoryFormat) -> None:
    from mtl_graph.cli import app
    from mtl_graph.pipeline.build import build_mtl_graph
    from mtl_graph.config import MTLConfig, MTLContext
    from mtl_graph.pipeline.pool_browser import PoolQuery

    assert built_in(formats.names()) == BUILT_IN and formats.names()[-1] == "toy" and memory_type_of(" Toy ").value == "toy" == MemoryType("toy")
    assert MTLContext(memory_type="toy").memory_type == "toy" and MTLConfig(loop={"distill_formats": ["toy"]}).loop.distill_formats
    assert PoolQuery(format="toy").format == "toy"
    form = build_mtl_graph(None, None).get_context_jsonschema()["properties"]["memory_type"]  # Studio's form
    assert "toy" in json.dumps(form) and "none" in json.dumps(form)
    for command in (["memories", "search", "--help"], ["memories", "list", "--help"], ["ingest", "--help"],
                    ["pool", "consolidate", "--help"]):
        shown = runner.invoke(app, command, env={"COLUMNS": "200"})
        assert shown.exit_code == 0 and "summary, toy, trajectory" in shown.output, (command, shown.output)
    assert isinstance(DISTILLERS["toy"], ModelDistiller) and "toy" in list(DISTILLERS)
    assert MEMORY_CLASSES["toy"] is ToyMemory


def test_a_registered_format_is_distilled_stored_and_retrieved(toy: MemoryFormat, pool) -> None:
    from mtl_graph.memory.lifecycle.consolidate import Cluster, propose
    from mtl_graph.memory.fence import fence_memories

    model = ScriptedChatModel(answers={"ToyDraft": {"tip": TIP}})
    result = distill(run_of(), ["toy", "trajectory"], model, distill_model="scripted")
    assert not result.failures, result.failures
    memory = next(m for m in result.memories if m.type == "toy")
    assert isinstance(memory, ToyMemory) and memory.tip == TIP and memory.outcome == Outcome.SUCCESS
    assert memory.sources[0].distill_model == "scripted" and memory.key_text() == TIP
    again = DistillResult.model_validate_json(result.model_dump_json())  # the union takes the new format too
    assert again.memories == result.memories

    pool.add(memory)
    pool.add(next(m for m in result.memories if m.type == "trajectory"))
    assert pool.count("toy") == 1 and pool.stats()["type"] == {"toy": 1, "trajectory": 1}
    [hit] = pool.search("check each change against the same failing command", type="toy", k=3)
    assert hit.memory == pool.get(memory.id) and isinstance(hit.memory, ToyMemory)
    assert parse_memory(memory.model_dump_json()) == memory
    shown = fence_memories([hit.memory]).text
    assert "Memory 1 (toy, success):\n│ tip (outcome: success)\n│ Rerun the exact failing command" in shown

    # consolidating needs a merge prompt, which this format does not declare: said so for its cluster alone
    proposal = propose(Cluster(MemoryType("toy"), Outcome.SUCCESS, [memory, memory], 1.0), model)
    assert proposal.merged is None and "declare no merge prompt" in proposal.error


def test_a_failed_run_gets_the_failure_prompt_and_a_model_is_required(toy: MemoryFormat) -> None:
    failed = distill(run_of(VerdictStatus.FAIL), ["toy"], ScriptedChatModel(answers={"ToyDraft": {"tip": TIP}}))
    assert failed.memories[0].outcome == Outcome.FAILURE
    none = distill(run_of(), ["toy"], None)
    assert [(f.format, f.reason) for f in none.failures] == [("toy", "no model given to distil with")]


def test_an_unregistered_format_is_gone_everywhere() -> None:
    from mtl_graph.config import MTLContext, SettingsError

    with registered(TOY):
        stored = ToyMemory(tip=TIP).model_dump(mode="json")
    assert "toy" not in formats.names() and "toy" not in DISTILLERS
    with pytest.raises(ValidationError, match="union_tag_invalid"):
        parse_memory(stored)
    choices = ", ".join(f"'{name}'" for name in [*formats.names(), "none"])
    with pytest.raises(SettingsError, match=f"invalid memory_type 'toy': input should be {choices}"):
        MTLContext(memory_type="toy")
    with pytest.raises(ValueError, match="unknown memory type 'toy'; expected one of: trajectory, workflow"):
        memory_type_of("toy")


@pytest.mark.parametrize("change, says", [
    ({"memory": InsightMemory}, "InsightMemory.type must default to 'toy'"),
    ({"name": "none"}, "a name is lowercase letters"),
    ({"name": "Toy Box"}, "a name is lowercase letters"),
    ({"prompts": ("toy", "no_such_prompt")}, "no prompt template named 'no_such_prompt.md'"),
    ({"draft": None}, "needs a draft schema and its two prompts"),
])
def test_a_bad_declaration_is_one_clear_line(change: dict, says: str) -> None:
    fields = {name: getattr(TOY, name) for name in TOY.__dataclass_fields__}
    with pytest.raises(FormatError, match=says) as error:
        formats.register(MemoryFormat(**{**fields, **change}))
    assert "\n" not in str(error.value) and "toy" not in formats.names()


def test_a_taken_name_is_refused() -> None:
    fields = {name: getattr(TOY, name) for name in TOY.__dataclass_fields__}

    class InsightToy(ToyMemory):
        type: Literal["insight"] = "insight"  # type: ignore[assignment]

    with pytest.raises(FormatError, match="'insight' is already registered"):
        formats.register(MemoryFormat(**{**fields, "name": "insight", "memory": InsightToy}))
    assert formats.get("insight").memory is InsightMemory
