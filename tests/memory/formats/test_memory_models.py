"""The four memory formats: identity, validation, keys and prompt rendering."""

import pytest
from pydantic import ValidationError

from mtl_graph.memory.base import Provenance, memory_type_of, parse_memory, render_memories
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.summary import SummaryMemory
from mtl_graph.memory.formats.trajectory import TrajectoryMemory, TrajectoryStep
from mtl_graph.memory.formats.workflow import WorkflowMemory


def test_id_is_a_content_hash_independent_of_provenance():
    a = InsightMemory(title="T", description="D", content="C", sources=[Provenance(domain="x")])
    b = InsightMemory(title="T", description="D", content="C", sources=[Provenance(domain="y")])
    c = InsightMemory(title="T", description="D", content="C2")
    assert a.id == b.id != c.id
    assert parse_memory(a.model_dump_json()) == a


def test_keys_follow_the_research_table():
    traj = TrajectoryMemory(task="Fix the bug", steps=[TrajectoryStep(command="ls", observation="a.py")])
    assert traj.key_text() == "Fix the bug"
    assert WorkflowMemory(goal="When tests fail", actions=["read"]).key_text() == "When tests fail"
    assert SummaryMemory(task_summary="S", experience_summary="E").key_text() == "S"
    assert InsightMemory(title="T", description="D", content="C").key_text() == "T. D"


def test_rendering_cuts_observations_and_shows_outcome():
    long_obs = "x" * 1000
    traj = TrajectoryMemory(task="Task", outcome="failure",
                            steps=[TrajectoryStep(command="cat big", observation=long_obs, exit_code=1)])
    text = traj.render(1)
    assert "outcome: failure" in text and "[cut 700 chars]" in text and "x" * 301 not in text
    assert "x" * 50 + "..." in traj.render(1, observation_chars=50)
    both = render_memories([InsightMemory(title="T", description="D", content="C"),
                            WorkflowMemory(goal="G", actions=["a", "b"], outcome="success")])
    assert "## Memory 1: T" in both and "## Memory 2: workflow (outcome: success)" in both and "2. b" in both


@pytest.mark.parametrize("data, where", [
    ({"type": "poem", "text": "x"}, "union_tag_invalid"),
    ({"type": "insight", "title": "  ", "description": "d", "content": "c"}, "title"),
    ({"type": "insight", "title": "t" * 301, "description": "d", "content": "c"}, "title"),
    ({"type": "workflow", "goal": "g", "actions": []}, "actions"),
    ({"type": "trajectory", "task": "t", "steps": []}, "steps"),
    ({"type": "summary", "task_summary": "s"}, "experience_summary"),
    ({"type": "insight", "title": "t", "description": "d", "content": "c", "extra": 1}, "extra"),
])
def test_bad_memories_are_clear_validation_errors(data, where):
    with pytest.raises(ValidationError) as info:
        parse_memory(data)
    assert where in str(info.value)


def test_memory_type_names():
    assert memory_type_of(" Insight ").value == "insight"
    with pytest.raises(ValueError, match="expected one of: trajectory, workflow, summary, insight"):
        memory_type_of("poem")
